// A small reactive core: signals, effects and a DOM builder. No third-party code.

let running = null

/** A value that notifies the effects that read it when it changes. */
export function signal(initial) {
  let value = initial
  const subscribers = new Set()
  const read = () => {
    if (running) subscribers.add(running)
    return value
  }
  read.set = (next) => {
    if (Object.is(next, value)) return
    value = next
    for (const fn of [...subscribers]) fn()
  }
  read.update = (fn) => read.set(fn(value))
  read.peek = () => value
  return read
}

/** Run `fn` now and again whenever a signal it read changes. */
export function effect(fn) {
  const run = () => {
    const previous = running
    running = run
    try {
      fn()
    } finally {
      running = previous
    }
  }
  run()
  return run
}

/**
 * Build an element: h('button', {type: 'button', onclick: fn, 'aria-label': 'Send'}, 'Send').
 * Attributes starting with "on" are listeners; `null`/`false` attributes are left out;
 * children may be strings, nodes, arrays or null.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag)
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value)
    } else if (key === 'class') {
      el.className = value
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value)
    } else if (key === 'value' || key === 'checked' || key === 'selected') {
      el[key] = value
    } else {
      el.setAttribute(key, value === true ? '' : String(value))
    }
  }
  append(el, children)
  return el
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    if (Array.isArray(child)) append(el, child)
    else el.append(child instanceof Node ? child : String(child))
  }
}

/** Replace the children of `el`. */
export function mount(el, ...children) {
  el.replaceChildren()
  append(el, children)
  return el
}

/** Announce `text` to assistive technology and show it in the status bar. */
export function announce(text) {
  const status = document.getElementById('status')
  if (status) status.textContent = text
}

/**
 * A redraw whose calls may overlap (each awaits its Markdown renders): `drawAs(stale)` is run
 * for every call and must not mount once `stale()` says a newer call has started, so an older
 * draw answering last never covers a newer one. A superseded call's promise settles with the
 * newest call's, so what awaits a draw (focusing a control in it) finds what is finally shown.
 */
export function newestOnly(drawAs) {
  let generation = 0
  let newest = null
  return () => {
    const mine = ++generation
    const stale = () => mine !== generation
    newest = drawAs(stale).then((value) => (stale() ? newest : value))
    return newest
  }
}
