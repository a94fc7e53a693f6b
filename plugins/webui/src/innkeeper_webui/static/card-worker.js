// The API a card script sees inside its Worker (docs/webui.md "Card scripts"). The sandbox
// document (card-sandbox.js) puts this function's source, then the card's code, into one blob
// and starts a dedicated Worker from it; the Worker inherits the sandbox's policy, so it has no
// network, no page, no cookies. Everything the script may do goes out as a message; the trusted
// page decides (grant, binding, rate limits) and answers.
//
// The surface is finite, on purpose: Mvu.getMvuData / updateVariablesWith (a JSON patch array) /
// replaceMvuData, getChatMessages(0), SillyTavern.getContext().chat, eventOn / eventRemoveListener
// with tavern_events and Mvu.events, waitGlobalInitialized('Mvu'), errorCatched, a small `_` and a
// small `$` that draws into the script's own panel. Anything else is simply not there.

/* exported innkeeperCardWorker */
// eslint-disable-next-line no-unused-vars
function innkeeperCardWorker(scope, initial) {
  'use strict'
  const post = scope.postMessage.bind(scope)
  const listen = scope.addEventListener.bind(scope)
  const clone = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))

  // The bound state as the page last read it: variables ({stat_data, …}) and the revision a
  // write is made against, the greeting getChatMessages(0) shows, and the chat's length.
  let { variables = null, revision = null, first = null, chatLength = 1 } = initial || {}
  let cause = 'script' // what the callback running now was started by
  const listeners = new Map() // event name -> [fn]
  const handlers = new Map() // handler id -> fn (panel events)
  const writes = new Map() // write id -> {resolve, reject}
  const texts = new Map() // selector -> {text, html, val}: what the getters answer
  const counts = new Map() // selector -> elements matched at the last draw
  const ready = []
  let started = false
  let ops = []
  let nextId = 0

  function report(err) {
    const message = err && err.message ? String(err.message) : String(err)
    post({ type: 'error', message: message.slice(0, 500), name: err && err.name ? String(err.name) : 'Error' })
  }

  /** Run a callback with the cause of what started it; a throw stops the script. */
  function run(fn, why, ...args) {
    const before = cause
    cause = why
    try {
      const out = fn(...args)
      if (out && typeof out.then === 'function') out.then(null, report)
      return out
    } catch (err) {
      report(err)
      return undefined
    } finally {
      cause = before
    }
  }

  function emit(name, ...args) {
    for (const fn of [...(listeners.get(name) || [])]) run(fn, 'script', ...args)
  }

  function write(operation, value) {
    if (variables === null) return Promise.reject(new Error('no variables are bound to this chat'))
    const id = ++nextId
    post({ type: 'write', id, operation, value: clone(value), revision, cause })
    return new Promise((resolve, reject) => writes.set(id, { resolve, reject }))
  }

  const events = Object.freeze({ VARIABLE_UPDATE_ENDED: 'mag_variable_update_ended' })
  const Mvu = Object.freeze({
    events,
    getMvuData(options) {
      if (options !== undefined && options !== null) {
        const { type = 'message', message_id: id = 'latest' } = options
        const latest = id === 'latest' || id === -1 || id === chatLength - 1 || (String(id) === '0' && chatLength === 1)
        if (type !== 'message' || !latest) throw new Error('only the latest message\'s variables are bound to this script')
      }
      if (variables === null) throw new Error('no variables are bound to this chat')
      return clone(variables)
    },
    updateVariablesWith(patch) {
      if (!Array.isArray(patch) || !patch.length) throw new TypeError('updateVariablesWith takes a non-empty JSON patch array')
      return write('patch', patch)
    },
    async replaceMvuData(value) {
      if (!value || typeof value !== 'object' || Array.isArray(value)) throw new TypeError('replaceMvuData takes a variables object')
      return write('replace', value)
    },
  })
  const tavernEvents = Object.freeze({
    MESSAGE_RECEIVED: 'message_received',
    MESSAGE_UPDATED: 'message_updated',
    MESSAGE_SWIPED: 'message_swiped',
    CHARACTER_FIRST_MESSAGE_SELECTED: 'character_first_message_selected',
  })
  const projection = () => (first ? { message_id: 0, name: first.name, role: 'assistant', is_hidden: false, message: first.text, data: {}, extra: {} } : null)

  // ---- the panel: a `$` subset whose calls become draw operations in the sandbox document
  function flush() {
    const batch = ops
    ops = []
    if (batch.length) post({ type: 'draw', ops: batch })
  }
  function op(entry) {
    if (!ops.length) queueMicrotask(flush)
    ops.push(entry)
  }
  function query(selector) {
    const sel = selector === scope.document ? 'document' : String(selector)
    const known = () => texts.get(sel) || {}
    const set = (key, value) => texts.set(sel, { ...known(), [key]: value })
    const q = {
      get length() {
        return counts.get(sel) || 0
      },
      text(value) {
        if (value === undefined) return known().text ?? ''
        set('text', String(value))
        op({ sel, method: 'text', value: String(value) })
        return q
      },
      html(value) {
        if (value === undefined) return known().html ?? ''
        set('html', String(value))
        op({ sel, method: 'html', value: String(value) })
        return q
      },
      val(value) {
        if (value === undefined) return known().val ?? ''
        set('val', String(value))
        op({ sel, method: 'val', value: String(value) })
        return q
      },
      css(name, value) {
        const props = typeof name === 'object' && name ? name : { [name]: value }
        op({ sel, method: 'css', value: Object.fromEntries(Object.entries(props).map(([k, v]) => [String(k), String(v)])) })
        return q
      },
      show: () => (op({ sel, method: 'show' }), q),
      hide: () => (op({ sel, method: 'hide' }), q),
      empty: () => (set('html', ''), op({ sel, method: 'empty' }), q),
      addClass: (name) => (op({ sel, method: 'addClass', value: String(name) }), q),
      removeClass: (name) => (op({ sel, method: 'removeClass', value: String(name) }), q),
      on(event, child, fn) {
        if (typeof child === 'function') [child, fn] = [null, child]
        if (typeof fn !== 'function') throw new TypeError('on(event, [selector], handler)')
        const id = ++nextId
        handlers.set(id, fn)
        op({ sel, method: 'on', value: String(event), child: child === null ? null : String(child), handler: id })
        return q
      },
      ready(fn) {
        if (started) run(fn, 'script')
        else ready.push(fn)
        return q
      },
    }
    return q
  }
  const $ = (arg) => (typeof arg === 'function' ? query('document').ready(arg) : query(arg))

  const lodash = Object.freeze({
    get(object, path, fallback) {
      const keys = Array.isArray(path) ? path : String(path).replace(/\[(?:'([^']*)'|"([^"]*)"|(\d+))\]/g, '.$1$2$3').split('.').filter((k) => k !== '')
      let node = object
      for (const key of keys) {
        if (node === null || node === undefined || !Object.prototype.hasOwnProperty.call(node, key)) return fallback
        node = node[key]
      }
      return node === undefined ? fallback : node
    },
    isEmpty(value) {
      if (value === null || value === undefined) return true
      if (typeof value === 'string' || Array.isArray(value)) return value.length === 0
      if (typeof value === 'object') return Object.keys(value).length === 0
      return true
    },
  })

  const documentTarget = new EventTarget()
  const api = {
    Mvu,
    tavern_events: tavernEvents,
    eventOn(name, fn) {
      if (typeof fn !== 'function') throw new TypeError('eventOn(event, handler)')
      if (!listeners.has(name)) listeners.set(name, [])
      listeners.get(name).push(fn)
    },
    eventRemoveListener(name, fn) {
      listeners.set(name, (listeners.get(name) || []).filter((f) => f !== fn))
    },
    waitGlobalInitialized: async (name) => {
      if (name !== 'Mvu') throw new Error(`${name} is not available to card scripts`)
    },
    getChatMessages(id) {
      if (String(id) !== '0') throw new Error('only the first message (0) is readable by card scripts')
      const message = projection()
      return message ? [message] : []
    },
    SillyTavern: Object.freeze({
      getContext: () => ({ chat: Array.from({ length: chatLength }, (_, i) => (i === 0 ? projection() : null)) }),
    }),
    errorCatched: (fn) => (...args) => run(fn, cause, ...args),
    _: lodash,
    $,
    document: documentTarget,
    window: scope,
  }
  for (const [name, value] of Object.entries(api)) Object.defineProperty(scope, name, { value, writable: false, configurable: false })
  // Timers keep the cause the spec names for them.
  for (const name of ['setTimeout', 'setInterval']) {
    const original = scope[name].bind(scope)
    scope[name] = (fn, ms, ...args) => original(() => (typeof fn === 'function' ? run(fn, 'interval', ...args) : report(new TypeError('string timers are not allowed'))), ms)
  }

  listen('message', (ev) => {
    const msg = ev.data || {}
    if (msg.type === 'ping') post({ type: 'pong', n: msg.n })
    else if (msg.type === 'state') {
      const changed = revision !== null && msg.revision !== revision
      variables = msg.variables
      revision = msg.revision
      first = msg.first
      chatLength = msg.chatLength
      if (changed) emit(events.VARIABLE_UPDATE_ENDED)
    } else if (msg.type === 'event') emit(msg.name, ...(msg.args || []))
    else if (msg.type === 'written') {
      const found = writes.get(msg.id)
      writes.delete(msg.id)
      if (found && msg.ok) found.resolve()
      else if (found) found.reject(new Error(msg.message || 'the write was refused'))
    } else if (msg.type === 'counts') {
      for (const [sel, n] of Object.entries(msg.counts)) counts.set(sel, n)
    } else if (msg.type === 'dom') {
      const fn = handlers.get(msg.handler)
      if (msg.sel && msg.value !== undefined) texts.set(msg.sel, { ...(texts.get(msg.sel) || {}), val: msg.value })
      if (fn) run(fn, 'user-interaction', { type: msg.event, target: { value: msg.value ?? '' } })
    } else if (msg.type === 'start') {
      started = true
      for (const fn of ready.splice(0)) run(fn, 'script')
      documentTarget.dispatchEvent(new Event('DOMContentLoaded'))
      scope.dispatchEvent(new Event('DOMContentLoaded'))
      scope.dispatchEvent(new Event('load'))
      post({ type: 'started' })
    }
  })
  scope.addEventListener('unhandledrejection', (ev) => report(ev.reason))
  post({ type: 'loaded' })
  // Returns the runner the card's code is wrapped in (its top-level throw stops it too).
  return (body) => run(body, 'script')
}
