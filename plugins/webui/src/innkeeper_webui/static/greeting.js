// The greeting: a display projection of the card (never written as history), with the picker
// ("Previous greeting" / "Next greeting") while the run has not started. Shared by the opening
// draft and the chat.

import { h } from './core.js'
import { t } from './i18n.js'
import { setHtml } from './markdown.js'

/** `{{char}}` / `{{user}}` filled for display. */
export function fillMacros(text, character) {
  return (text || '').replace(/\{\{char\}\}/gi, character.name).replace(/\{\{user\}\}/gi, 'User')
}

/** first_mes, then the alternate greetings. */
export function greetingsOf(character) {
  return [character.data.firstMessage, ...(character.data.alternateGreetings || [])].filter((g) => g !== undefined)
}

/** The greeting article: its rendered `html`, and the picker when `onPick(index)` is given. */
export function greetingArticle(character, html, index, onPick) {
  const count = greetingsOf(character).length
  const picker = !onPick || count < 2 ? null : h('div', { class: 'actions' },
    h('button', { type: 'button', disabled: index <= 0, 'aria-label': t('previousGreeting'),
      onclick: () => onPick(index - 1) }, '‹'),
    h('span', {}, t('greeting', { i: index + 1, n: count })),
    h('button', { type: 'button', disabled: index >= count - 1, 'aria-label': t('nextGreeting'),
      onclick: () => onPick(index + 1) }, '›'))
  const body = h('div', { class: 'body' })
  setHtml(body, html)
  return h('article', { class: 'msg assistant greeting', 'aria-label': character.name },
    h('header', {}, character.name), body, picker)
}

/** Keep the focus on the picker after a redraw: on the button that can still move. */
export function focusPicker(log, index) {
  const label = index > 0 ? t('previousGreeting') : t('nextGreeting')
  const target = log.querySelector(`.greeting button[aria-label="${label}"]`)
  if (target) target.focus()
}
