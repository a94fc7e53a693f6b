// The card-script sandbox document (served at /webui/card-sandbox with its own strict policy:
// an opaque origin, no network; docs/webui.md "Card scripts"). It hosts one card script in a
// dedicated Worker built from a blob, relays the Worker's requests to the page that framed it,
// and draws the script's `$` operations into this document — the script's panel, nothing else.
// The card's code never runs here: only in the Worker.

/* global innkeeperCardWorker */
;(function () {
  'use strict'
  const PAGE_ORIGIN = new URL(location.href).origin // the page's origin (ours is opaque)
  const MAX_HTML = 256 * 1024
  let worker = null
  const toPage = (msg) => parent.postMessage(msg, PAGE_ORIGIN)

  // The page's limits (card-scripts.js), applied here too so a flooding Worker is cut off at
  // its source, before its messages queue up in the page.
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
  let messages = null
  let writes = null
  function flood() {
    worker.terminate()
    worker = null
    toPage({ type: 'flood' })
  }

  function targets(sel) {
    if (sel === 'document') return [document]
    if (sel === 'body' || sel === 'html') return [document.body]
    return [...document.querySelectorAll(sel)]
  }

  function draw(ops) {
    const counts = {}
    for (const { sel, method, value, child, handler } of ops) {
      const els = targets(String(sel))
      counts[sel] = els.length
      for (const el of els) {
        const node = el === document ? document.body : el
        if (method === 'text') node.textContent = value
        else if (method === 'html') {
          if (value.length > MAX_HTML) throw new Error(`html() over ${MAX_HTML} characters`)
          node.innerHTML = value // scripts, handlers and requests are refused by this document's policy
        } else if (method === 'val') node.value = value
        else if (method === 'css') for (const [k, v] of Object.entries(value)) node.style.setProperty(k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase()), v)
        else if (method === 'show') node.hidden = false
        else if (method === 'hide') node.hidden = true
        else if (method === 'empty') node.replaceChildren()
        else if (method === 'addClass') node.classList.add(...value.split(/\s+/).filter(Boolean))
        else if (method === 'removeClass') node.classList.remove(...value.split(/\s+/).filter(Boolean))
        else if (method === 'on') {
          el.addEventListener(value, (ev) => {
            const hit = child ? ev.target.closest && ev.target.closest(child) : ev.target
            if (!hit) return
            worker.postMessage({ type: 'dom', handler, event: ev.type, sel: child || sel, value: 'value' in hit ? String(hit.value) : undefined })
          })
        }
      }
    }
    worker.postMessage({ type: 'counts', counts })
    toPage({ type: 'size', height: document.documentElement.scrollHeight })
  }

  function boot(source, state, limits) {
    messages = bucket(limits.messageBurst, limits.messageRate)
    writes = bucket(limits.writeBurst, limits.writeRate)
    const text = `const __run = (${innkeeperCardWorker.toString()})(self, ${JSON.stringify(state)});\n` +
      `__run(async function () {\n${source}\n});\n`
    const url = URL.createObjectURL(new Blob([text], { type: 'text/javascript' }))
    worker = new Worker(url)
    URL.revokeObjectURL(url)
    worker.addEventListener('message', (ev) => {
      if (!worker) return
      const msg = ev.data || {}
      if (!messages() || (msg.type === 'write' && !writes())) return flood()
      if (msg.type === 'draw') {
        try {
          draw(Array.isArray(msg.ops) ? msg.ops : [])
        } catch (err) {
          toPage({ type: 'error', name: 'DrawError', message: String(err && err.message ? err.message : err) })
        }
      } else toPage(msg) // pong, write, error, loaded, started: the page decides
    })
    worker.addEventListener('error', (ev) => {
      ev.preventDefault()
      toPage({ type: 'error', name: 'Error', message: String(ev.message || 'the script failed to start') })
    })
  }

  addEventListener('message', (ev) => {
    if (ev.source !== parent || ev.origin !== PAGE_ORIGIN) return
    const msg = ev.data || {}
    if (msg.type === 'boot' && !worker) boot(String(msg.source), msg.state, msg.limits)
    else if (msg.type === 'terminate' && worker) {
      worker.terminate()
      worker = null
    } else if (worker) worker.postMessage(msg) // ping, state, event, written, start
  })
  toPage({ type: 'sandbox-ready' })
})()
