// The view switch (the chrome mode of docs/contract/play.md#chrome, described for players in
// docs/webui.md#what-you-can-do): the frontend display mode every tab shares, `native` (the
// classic view: this page as it is) or `play` (the play view a play frontend draws). Shown as a
// small button naming the current view; its menu opens only when the button is clicked and
// closes on Escape, a click elsewhere or a switch. Every tab re-reads /v2/chrome (each second
// while visible, and on focus), so a change made in one tab shows in the others without an event
// stream per tab.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { chrome } from './api.js'
import { attempt } from './ui.js'

const label = (mode) => (mode === 'play' ? t('viewPlay') : t('viewClassic'))

export function orb(container) {
  let mode = null
  const menu = h('div', { class: 'orb-menu', id: 'orb-menu', role: 'group', hidden: true })
  const button = h('button', {
    type: 'button', class: 'orb', 'aria-haspopup': 'true', 'aria-expanded': 'false', 'aria-controls': 'orb-menu', 'aria-label': t('viewSwitch'),
    onclick: () => setOpen(menu.hidden),
  }, '')

  function setOpen(open) {
    menu.hidden = !open
    button.setAttribute('aria-expanded', String(open))
    if (open) menu.querySelector('button')?.focus()
  }

  document.addEventListener('click', (ev) => {
    if (!menu.hidden && !container.contains(ev.target)) setOpen(false)
  })
  container.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && !menu.hidden) {
      setOpen(false)
      button.focus()
    }
  })

  async function switchMode() {
    const next = mode === 'play' ? 'native' : 'play'
    const r = await attempt(() => chrome.set(next))
    if (!r) return
    show(r.mode)
    setOpen(false)
    button.focus()
    announce(t('viewNow', { view: label(r.mode) }))
  }

  function show(next) {
    mode = next
    document.body.dataset.chrome = mode
    button.textContent = label(mode)
    button.title = t('viewSwitch')
    button.setAttribute('aria-label', `${t('viewSwitch')}: ${label(mode)}`)
    mount(menu,
      h('p', { class: 'muted' }, mode === 'play' ? t('viewPlayExplain') : t('viewClassicExplain')),
      h('button', { type: 'button', onclick: switchMode }, mode === 'play' ? t('viewToClassic') : t('viewToPlay')))
  }

  mount(container, button, menu)
  chrome.watch((state) => {
    if (state.mode === mode) return // our own switch is already shown
    const first = mode === null
    show(state.mode)
    if (!first) announce(t('viewNow', { view: label(state.mode) })) // switched in another tab
  })
  /** Redraw the labels after a language change. */
  return () => {
    if (mode) show(mode)
  }
}
