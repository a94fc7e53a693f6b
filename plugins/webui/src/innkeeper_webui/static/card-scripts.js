// Card scripts of the chat's character (docs/webui.md "Card scripts"): each enabled
// `extensions.tavern_helper` script runs in its own sandboxed frame (an opaque origin with no
// network, card-sandbox.js) inside a Worker (card-worker.js). This module is the trusted side:
// it asks the player once per card (and remembers the answer until the scripts change or the
// player revokes it), binds each script's execution through the host (rendering-write-grants,
// mvu/card-binding), makes its writes through mvu/card-write, and stops a script that throws,
// stops answering (a watchdog ping) or floods (token buckets) — with a notice, never blocking
// the chat, whose code never waits on a script.

import { h, mount } from './core.js'
import { extendText, t } from './i18n.js'
import { ApiError, cardExecution, mvu } from './api.js'
import { fillMacros, greetingsOf } from './greeting.js'

extendText({
  en: {
    cardScripts: 'Card scripts',
    cardScriptsAsk: '{name} has {n} card script(s): {names}.',
    cardScriptsMay: 'If you allow them, they may: read this chat’s variables and its first message; change this chat’s variables; draw in their own small panel below the chat.',
    cardScriptsMayNot: 'They cannot reach the network, this page, your other chats or anything on this computer.',
    cardScriptsAllow: 'Allow scripts',
    cardScriptsDeny: 'Don’t allow',
    cardScriptsRevoke: 'Revoke scripts',
    cardScriptsOff: 'Card scripts are off for {name}.',
    cardScriptsRunning: 'Running: {names}',
    cardScriptPanel: 'Card script: {name}',
    cardScriptStopped: 'Card script “{name}” was stopped: {reason}',
    cardScriptStopError: 'it failed ({message}).',
    cardScriptStopHang: 'it stopped answering (an endless loop?).',
    cardScriptStopFlood: 'it wrote or sent too much, too fast.',
    cardScriptsInsecure: 'Card scripts need a secure page (localhost or HTTPS).',
    cardScriptWriteFailed: 'Card script “{name}” could not change the variables: {message}',
  },
  zh: {
    cardScripts: '角色卡脚本',
    cardScriptsAsk: '{name} 带有 {n} 个角色卡脚本：{names}。',
    cardScriptsMay: '允许后，它们可以：读取本聊天的变量和第一条消息；修改本聊天的变量；在聊天下方自己的小面板中绘制。',
    cardScriptsMayNot: '它们无法访问网络、本页面、你的其他聊天或这台电脑上的任何内容。',
    cardScriptsAllow: '允许脚本',
    cardScriptsDeny: '不允许',
    cardScriptsRevoke: '撤销脚本',
    cardScriptsOff: '{name} 的角色卡脚本已关闭。',
    cardScriptsRunning: '运行中：{names}',
    cardScriptPanel: '角色卡脚本：{name}',
    cardScriptStopped: '角色卡脚本“{name}”已停止：{reason}',
    cardScriptStopError: '出错（{message}）。',
    cardScriptStopHang: '没有响应（死循环？）。',
    cardScriptStopFlood: '写入或发送过多过快。',
    cardScriptsInsecure: '角色卡脚本需要安全页面（localhost 或 HTTPS）。',
    cardScriptWriteFailed: '角色卡脚本“{name}”无法修改变量：{message}',
  },
})

/** Watchdog: a ping every PING_MS; a script silent for HANG_MS (START_MS at start) is stopped. */
export const PING_MS = 500
export const HANG_MS = 4000
export const START_MS = 6000
/** Writes: a bucket of WRITE_BURST, refilled at WRITE_RATE a second. */
export const WRITE_BURST = 20
export const WRITE_RATE = 10
/** Every message from a script's frame: a bucket of MESSAGE_BURST, MESSAGE_RATE a second. */
export const MESSAGE_BURST = 400
export const MESSAGE_RATE = 200
/** Tallest panel drawn (pixels); a taller one scrolls inside its frame. */
const MAX_PANEL_PX = 320
const DECISIONS_KEY = 'innkeeper.webui.cardScripts'

/** The card's enabled scripts `[{name, content}]` (TavernHelper layouts, in order). */
export function enabledScripts(character) {
  const ext = (character && character.data && character.data.extensions) || {}
  const helper = ext.tavern_helper
  const lists = [helper && !Array.isArray(helper) ? helper.scripts : helper, ext.TavernHelper_scripts]
  const out = []
  for (const list of lists) {
    if (!Array.isArray(list)) continue
    for (const s of list) {
      if (s && typeof s.content === 'string' && s.enabled !== false) out.push({ name: String(s.name || s.id || out.length + 1), content: s.content })
    }
  }
  return out
}

async function sha256(text) {
  const bytes = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, '0')).join('')
}

const decisions = () => {
  try {
    return JSON.parse(localStorage.getItem(DECISIONS_KEY) || '{}')
  } catch {
    return {}
  }
}
function decide(characterId, digest, allowed) {
  const all = decisions()
  all[characterId] = { digest, allowed }
  localStorage.setItem(DECISIONS_KEY, JSON.stringify(all))
}

const newId = (prefix) => `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`

function bucket(burst, rate) {
  let tokens = burst
  let at = performance.now()
  return () => {
    const now = performance.now()
    tokens = Math.min(burst, tokens + ((now - at) / 1000) * rate)
    at = now
    if (tokens < 1) return false
    tokens -= 1
    return true
  }
}

/**
 * The "Card scripts" region of a chat. `update(ctx)` after every load of the chat:
 * `{character, playthroughId, sessionId, head: {nodeId, variantId, endEventId} | null,
 * replies, greetingIndex, greetingText}`. `dispose()` stops everything (leaving the chat).
 */
export function cardScriptsPanel() {
  const el = h('section', { class: 'card-scripts', 'aria-label': t('cardScripts'), hidden: true })
  const prompt = h('div')
  const frames = h('div', { class: 'card-script-frames' })
  const notices = h('div', { class: 'card-script-notices', role: 'status' })
  el.append(prompt, frames, notices)
  let ctx = null
  let scripts = [] // {name, content, digest}
  let digest = null
  let runs = [] // one per running or stopped script
  let asked = false
  let gone = false
  let pending = Promise.resolve()
  let last = null // what the scripts saw last: {replies, variantId, greetingIndex}
  let tick = performance.now()
  const watchdog = setInterval(() => {
    const now = performance.now()
    // This page was busy itself (its timer came late): no script is blamed for a late answer.
    const late = now - tick > 2 * PING_MS
    tick = now
    for (const run of runs) {
      if (late) run.lastPong = now
      if (run.stopped || !run.frame || !run.booted) continue
      if (now - run.lastPong > (run.started ? HANG_MS : START_MS)) stop(run, t('cardScriptStopHang'))
      else if (run.booted) run.send({ type: 'ping', n: ++run.pings })
    }
  }, PING_MS)
  window.addEventListener('message', onMessage)

  function notice(text) {
    notices.append(h('p', { class: 'notice failed', role: 'alert' }, text))
  }

  function drawPrompt() {
    const character = ctx.character
    const names = scripts.map((s) => s.name).join(', ')
    const decision = decisions()[character.id]
    if (!decision || decision.digest !== digest) {
      return mount(prompt, h('dialog', { open: true, class: 'card-scripts-ask', 'aria-label': t('cardScripts') },
        h('p', {}, t('cardScriptsAsk', { name: character.name, n: scripts.length, names })),
        h('p', {}, t('cardScriptsMay')), h('p', { class: 'muted' }, t('cardScriptsMayNot')),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => choose(true) }, t('cardScriptsAllow')),
          h('button', { type: 'button', onclick: () => choose(false) }, t('cardScriptsDeny')))))
    }
    if (!decision.allowed) {
      return mount(prompt, h('p', {}, t('cardScriptsOff', { name: character.name }), ' ',
        h('button', { type: 'button', class: 'small', onclick: () => choose(true) }, t('cardScriptsAllow'))))
    }
    mount(prompt, h('p', { class: 'muted' }, t('cardScriptsRunning', { names }), ' ',
      h('button', { type: 'button', class: 'small', onclick: () => choose(false) }, t('cardScriptsRevoke'))))
  }

  function choose(allowed) {
    decide(ctx.character.id, digest, allowed)
    if (!allowed) stopAll()
    drawPrompt()
    if (allowed) sync()
  }

  /** Stop every script: frames removed, bindings and grants dropped on the host. */
  function stopAll() {
    for (const run of runs) if (!run.stopped) halt(run)
    runs = []
    mount(frames)
    last = null
    synced = false
  }

  function halt(run) {
    run.stopped = true
    if (run.frame) {
      run.send({ type: 'terminate' })
      run.frame.remove() // the frame goes, and its Worker with it
      run.frame = null
    }
    const { binding, grant } = run
    run.binding = null
    // Best effort: a lost answer is harmless (the host drops both when it unloads).
    if (binding) cardExecution.revoke({ bindingId: binding.bindingId }).catch(() => {})
    if (grant) cardExecution.dropGrant(grant.grantId).catch(() => {})
  }

  function stop(run, reason) {
    if (run.stopped) return
    halt(run)
    notice(t('cardScriptStopped', { name: run.script.name, reason }))
  }

  function onMessage(ev) {
    const run = runs.find((r) => r.frame && ev.source === r.frame.contentWindow)
    if (!run || run.stopped) return
    if (!run.messages()) return stop(run, t('cardScriptStopFlood'))
    const msg = ev.data || {}
    if (msg.type === 'sandbox-ready') {
      run.ready = true
      boot(run)
    } else if (msg.type === 'pong') run.lastPong = performance.now()
    else if (msg.type === 'loaded') {
      run.lastPong = performance.now()
      run.send({ type: 'start' })
    } else if (msg.type === 'started') run.started = true
    else if (msg.type === 'flood') stop(run, t('cardScriptStopFlood'))
    else if (msg.type === 'error') stop(run, t('cardScriptStopError', { message: String(msg.message || msg.name).slice(0, 300) }))
    else if (msg.type === 'size') run.frame.style.height = `${Math.min(MAX_PANEL_PX, Math.max(24, Number(msg.height) || 0))}px`
    else if (msg.type === 'write') {
      if (!run.writes()) return stop(run, t('cardScriptStopFlood'))
      run.queue = run.queue.then(() => write(run, msg))
    }
  }

  // ---- state the scripts see: one read per update, shared by every script of the chat
  let state = null // {variables, revision, resourceId}
  let synced = false // the state was read at least once
  let noVariables = false
  const stateOf = () => ({
    variables: state ? state.variables : null,
    revision: state ? state.revision : null,
    first: ctx ? { name: ctx.character.name, text: ctx.greetingText } : null,
    chatLength: ctx ? 1 + 2 * ctx.replies : 1,
  })

  async function readState(resourceId) {
    const { resource } = await mvu.resource(resourceId, { authority: 'local', sessionId: ctx.sessionId })
    state = { variables: resource.content, revision: resource.revision, resourceId }
  }

  /** Start a frame's Worker once the frame is up and the chat's state was read (a script
   * reads its variables as it starts). */
  function boot(run) {
    if (run.booted || !run.ready || !synced || run.stopped) return
    run.booted = true
    run.lastPong = performance.now()
    const limits = { writeBurst: WRITE_BURST, writeRate: WRITE_RATE, messageBurst: MESSAGE_BURST, messageRate: MESSAGE_RATE }
    run.send({ type: 'boot', source: run.script.content, state: stateOf(), limits })
  }

  function broadcast(msg) {
    for (const run of runs) if (run.booted && !run.stopped) run.send(msg)
  }

  async function write(run, msg) {
    const answer = (ok, message) => run.send({ type: 'written', id: msg.id, ok, message })
    if (run.stopped) return
    // The revision the Worker saw and one operation id, kept when the write is made again.
    const body = {
      operation: msg.operation === 'replace' ? 'replace' : 'patch', value: msg.value,
      expectedRevision: Number.isInteger(msg.revision) ? msg.revision : state && state.revision,
      operationId: newId(run.executionId), cause: ['user-interaction', 'interval', 'script'].includes(msg.cause) ? msg.cause : 'script',
    }
    try {
      for (let attempt = 0; ; attempt++) {
        if (!run.binding) await bindRun(run, scopeOf(), JSON.stringify(scopeOf()))
        if (!run.binding) throw new ApiError(409, 'CARD_MESSAGE_READ_ONLY', 'this chat cannot be changed by scripts now (a reply is being written?)')
        try {
          await cardExecution.write({ ...body, capability: run.binding.capability })
          break
        } catch (err) {
          // The chat's timeline or catalog was written since the binding (the page itself
          // records every reply there): bind again to where the chat is, write once more.
          if (!(err instanceof ApiError) || err.code !== 'CARD_BINDING_STALE' || attempt > 0) throw err
          run.binding = null
          run.scopeKey = null
        }
      }
      await readState(run.binding.resourceId)
      broadcast({ type: 'state', ...stateOf() })
      answer(true)
      performance.mark('innkeeper:card-scripts:written') // tools/bench_card_scripts.py
    } catch (err) {
      if (err instanceof ApiError && err.code === 'MVU_REVISION_CONFLICT' && run.binding) {
        await readState(run.binding.resourceId).catch(() => {})
        broadcast({ type: 'state', ...stateOf() })
      }
      answer(false, `${err.message} (${err.code || 'ERROR'})`)
      // One line per script, the latest refusal (a script retrying in a loop adds no more).
      if (!run.failure) run.failure = notices.appendChild(h('p', { class: 'notice' }))
      run.failure.textContent = t('cardScriptWriteFailed', { name: run.script.name, message: `${err.message} (${err.code || 'ERROR'})` })
    }
  }

  /** Bind one script's execution to `scope` (its grant first, once). */
  async function bindRun(run, scope, key) {
    if (run.scopeKey === key && run.binding) return
    if (run.binding) cardExecution.revoke({ bindingId: run.binding.bindingId }).catch(() => {})
    run.binding = null
    if (!run.grant) {
      const identity = { version: 1, sha256: await sha256(run.source), scope: `webui:${ctx.character.id}` }
      run.grant = await cardExecution.grant({ source: run.source, sourceIdentity: identity, executionId: run.executionId, downloaded: true, enabled: true })
    }
    try {
      run.binding = await cardExecution.bind({ scope, grantId: run.grant.grantId, sourceIdentity: run.grant.sourceIdentity, bindingId: newId('webui-binding') })
      run.scopeKey = key
    } catch (err) {
      // A running turn or a message that is not the head: read-only until the next load.
      if (!(err instanceof ApiError) || !['CARD_MESSAGE_READ_ONLY', 'MVU_INITIAL_CLOSED', 'MVU_NOT_FOUND'].includes(err.code)) throw err
      if (err.code === 'MVU_NOT_FOUND') noVariables = true // the card has no MVU state to bind
    }
  }

  function scopeOf() {
    const { playthroughId, sessionId, characterId, head } = { ...ctx, characterId: ctx.character.id }
    return head ? { playthroughId, sessionId, nodeId: head.nodeId, variantId: head.variantId, endEventId: head.endEventId }
      : { mode: 'initial', playthroughId, sessionId, characterId }
  }

  /** Start the scripts not started yet, bind every running one to the chat's current scope,
   * read the state once, then tell the scripts what changed. */
  async function sync() {
    const decision = decisions()[ctx.character.id]
    if (gone || !decision || !decision.allowed || decision.digest !== digest) return
    if (!runs.length) runs = scripts.map((script) => start(script))
    const scope = scopeOf()
    const key = JSON.stringify(scope)
    const live = runs.filter((r) => !r.stopped)
    await Promise.all(live.map((run) => bindRun(run, scope, key)))
    const bound = live.find((r) => r.binding)
    if (bound) await readState(bound.binding.resourceId)
    if (gone) return
    broadcast({ type: 'state', ...stateOf() })
    // Scripts start with their variables read (or once it is known there are none); a chat
    // that could not be bound now (a reply being written) starts them at its next load.
    synced = state !== null || noVariables
    for (const run of live) boot(run)
    const now = { replies: ctx.replies, variantId: ctx.head && ctx.head.variantId, edited: ctx.head && ctx.head.edited, greetingIndex: ctx.greetingIndex }
    if (last && now.replies > last.replies) broadcast({ type: 'event', name: 'message_received', args: [2 * now.replies] })
    else if (last && now.replies === last.replies && now.variantId !== last.variantId && now.replies > 0) broadcast({ type: 'event', name: 'message_swiped', args: [2 * now.replies] })
    else if (last && now.replies === last.replies && now.variantId === last.variantId && now.edited !== last.edited && now.replies > 0) broadcast({ type: 'event', name: 'message_updated', args: [2 * now.replies] })
    else if (last && now.greetingIndex !== last.greetingIndex && now.replies === 0) {
      broadcast({ type: 'event', name: 'character_first_message_selected', args: [{ input: ctx.greetingText, output: ctx.greetingText }] })
      broadcast({ type: 'event', name: 'message_swiped', args: [0] })
    }
    last = now
    performance.mark('innkeeper:card-scripts:synced') // tools/bench_card_scripts.py
  }

  function start(script) {
    const frame = h('iframe', {
      src: '/webui/card-sandbox', sandbox: 'allow-scripts', title: t('cardScriptPanel', { name: script.name }),
      class: 'card-script-frame', referrerpolicy: 'no-referrer',
    })
    const run = {
      script, frame, executionId: newId('webui-exec'), grant: null, binding: null, scopeKey: null,
      source: JSON.stringify({ version: 1, characterId: ctx.character.id, name: script.name, content: script.content }),
      ready: false, booted: false, started: false, stopped: false, pings: 0, lastPong: performance.now(),
      queue: Promise.resolve(), writes: bucket(WRITE_BURST, WRITE_RATE), messages: bucket(MESSAGE_BURST, MESSAGE_RATE),
      send: (msg) => frame.contentWindow && frame.contentWindow.postMessage(msg, '*'), // its origin is opaque
    }
    frames.append(frame)
    return run
  }

  return {
    el,
    /** Show the chat's scripts: ask, run, re-bind and notify after a load of the chat (one
     * update at a time; the chat never waits for it). */
    update(next) {
      pending = pending.then(() => apply(next))
      return pending
    },
    dispose() {
      gone = true
      clearInterval(watchdog)
      window.removeEventListener('message', onMessage)
      stopAll()
    },
  }

  async function apply(next) {
    if (gone) return
    const changed = !ctx || ctx.character.id !== next.character.id
    const all = greetingsOf(next.character)
    ctx = { ...next, greetingText: fillMacros(all[Math.min(next.greetingIndex, all.length - 1)] || '', next.character) }
    if (changed) {
      stopAll()
      scripts = enabledScripts(next.character)
      el.hidden = !scripts.length
      if (!scripts.length) return
      if (!window.crypto || !crypto.subtle) {
        mount(prompt, h('p', { class: 'muted' }, t('cardScriptsInsecure')))
        return
      }
      digest = await sha256(JSON.stringify(scripts))
      asked = true
    }
    if (!asked) return
    drawPrompt()
    try {
      await sync()
    } catch (err) {
      notices.append(h('p', { class: 'notice' }, `${t('cardScripts')}: ${err.message} (${err.code || 'ERROR'})`))
    }
  }
}
