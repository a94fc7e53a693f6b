// The chrome orb (spec/API.md "v2 Tavern-owned interfaces"): the "DT" button switches the
// frontend display mode between the play frontend and DSH native. Left click opens its menu,
// right click switches at once; every tab re-reads /v2/chrome (each second while visible, and on
// focus), so a change made in one tab shows in the others without an event stream per tab.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { chrome } from './api.js'
import { attempt } from './ui.js'

export function orb(container) {
  let mode = null
  const menu = h('div', { class: 'orb-menu', id: 'orb-menu', hidden: true })
  const button = h('button', {
    type: 'button', class: 'orb', title: t('orbTooltip'), 'aria-label': t('orbTooltip'),
    'aria-expanded': 'false', 'aria-controls': 'orb-menu',
    onclick: () => {
      menu.hidden = !menu.hidden
      button.setAttribute('aria-expanded', String(!menu.hidden))
    },
    oncontextmenu: (ev) => {
      ev.preventDefault()
      switchMode()
    },
  }, 'DT')

  async function switchMode() {
    const next = mode === 'play' ? 'native' : 'play'
    const r = await attempt(() => chrome.set(next))
    if (r) show(r.mode)
  }

  function show(next) {
    mode = next
    document.body.dataset.chrome = mode
    mount(menu,
      h('p', { class: 'muted' }, mode === 'play' ? t('orbCurrentPlay') : t('orbCurrentNative')),
      h('button', { type: 'button', onclick: switchMode }, mode === 'play' ? t('orbToNative') : t('orbToPlay')))
    announce(mode === 'play' ? t('orbCurrentPlay') : t('orbCurrentNative'))
  }

  mount(container, button, menu)
  chrome.watch((state) => {
    if (state.mode !== mode) show(state.mode) // our own switch is already shown
  })
  /** Redraw the labels after a language change. */
  return () => {
    button.title = t('orbTooltip')
    button.setAttribute('aria-label', t('orbTooltip'))
    if (mode) show(mode)
  }
}
