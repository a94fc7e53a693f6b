// Shared UI helpers: the error banner, navigation, small widgets.

import { h, mount, signal } from './core.js'
import { t } from './i18n.js'
import { characters, modelSettings } from './api.js'

/** Show a server error with its message and code; nothing the player typed is touched. */
export function showError(err) {
  const box = document.getElementById('error')
  const code = err && err.code ? ` (${err.code})` : ''
  box.replaceChildren(
    h('span', { class: 'error-text' }, `${t('error')}: ${err && err.message ? err.message : String(err)}${code}`),
    h('button', { type: 'button', class: 'small', 'aria-label': t('cancel'), onclick: () => (box.hidden = true) }, '×'),
  )
  box.hidden = false
}

export function clearError() {
  document.getElementById('error').hidden = true
}

/** Run an async action, reporting a failure in the banner; returns its result or undefined. */
export async function attempt(fn) {
  try {
    return await fn()
  } catch (err) {
    showError(err)
    return undefined
  }
}

/** `?unpaged` draws every card and message at once: the baseline tools/bench_webui.py measures. */
export const UNPAGED = new URLSearchParams(location.search).has('unpaged')

/** Mark a view ready (tests wait for `data-ready`; the bench reads the performance mark). */
export function ready(view) {
  document.body.setAttribute('data-ready', view)
  performance.mark(`innkeeper:ready:${view}`)
}

export const route = signal(location.hash)
window.addEventListener('hashchange', () => route.set(location.hash))

export function go(hash) {
  if (location.hash === hash) route.set(hash)
  else location.hash = hash
}

/** Where this browser keeps the theme: `system` (follow the system), `light` or `dark`. */
const THEME_KEY = 'innkeeper.webui.theme'
export const THEMES = ['system', 'light', 'dark']

export function themeChoice() {
  const v = localStorage.getItem(THEME_KEY)
  return THEMES.includes(v) ? v : 'system'
}

/** Mark the chosen theme on <html data-theme> (none: the system's light or dark, by CSS). */
export function applyTheme(choice = themeChoice()) {
  if (choice === 'system') delete document.documentElement.dataset.theme
  else document.documentElement.dataset.theme = choice
}

export function setTheme(choice) {
  if (!THEMES.includes(choice)) return
  localStorage.setItem(THEME_KEY, choice)
  applyTheme(choice)
}

export function applyScale(settings) {
  document.documentElement.style.setProperty('--text-scale', String(settings.textScale || 1))
  document.documentElement.style.setProperty('--action-scale', String(settings.actionScale || 1))
}

/** A labelled select: options are [value, label]. */
export function labelledSelect(label, options, value, onchange) {
  const id = `sel-${Math.random().toString(36).slice(2, 9)}`
  return h('span', { class: 'field' },
    h('label', { for: id }, label),
    h('select', { id, onchange: (ev) => onchange(ev.target.value) },
      options.map(([v, l]) => h('option', { value: v, selected: v === value }, l))))
}

/** `src`/`srcset` of a card's avatar shown at most 200 CSS px tall: thumbnails, not the card PNG. */
export function avatar(characterId) {
  return {
    src: characters.thumbnailUrl(characterId, 192),
    srcset: `${characters.thumbnailUrl(characterId, 192)} 1x, ${characters.thumbnailUrl(characterId, 384)} 2x`,
  }
}

/**
 * The message box (a textbox named "Message") and its Send button: Enter sends, Shift+Enter is
 * a new line, and what is typed is kept per tab under `key` until the caller clears it.
 */
export function composer(key, send) {
  const box = h('textarea', {
    id: 'message', rows: 3, 'aria-label': t('message'),
    oninput: () => sessionStorage.setItem(key, box.value),
    onkeydown: (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault()
        send()
      }
    },
  })
  box.value = sessionStorage.getItem(key) || ''
  const button = h('button', { type: 'button', class: 'primary', onclick: () => send() }, t('send'))
  return { box, button }
}

/** Where a dismissed practice notice is remembered (this browser). */
const PRACTICE_DISMISSED = 'innkeeper.webui.practiceNoticeDismissed'

/**
 * "Practice mode": shown above the chat while the offline practice provider writes the replies
 * (no model connected), until dismissed; it says where to connect one.
 */
export function practiceNotice() {
  const box = h('div', { class: 'notice practice', role: 'note', 'aria-label': t('practiceNotice'), hidden: true })
  if (localStorage.getItem(PRACTICE_DISMISSED) === '1') return box
  mount(box, h('span', {}, t('practiceNotice')),
    h('button', { type: 'button', class: 'small', onclick: () => go('#/settings/model') }, t('openModelSettings')),
    h('button', { type: 'button', class: 'small', onclick: () => {
      localStorage.setItem(PRACTICE_DISMISSED, '1')
      box.hidden = true
    } }, t('dismiss')))
  modelSettings.get().then((view) => { box.hidden = !view.practice }, () => {})
  return box
}
