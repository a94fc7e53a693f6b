// A playthrough that has not started: its opening draft. The greeting picker edits the draft's
// selection, the opening variables (the selected greeting's MVU opening) are shown and editable,
// and the first send materializes the draft into a real session; the chat then takes over.
// Nothing typed is lost: the message box keeps its text per tab until the server accepted it.

import { h, mount, announce, newestOnly } from './core.js'
import { t } from './i18n.js'
import { characters } from './api.js'
import * as play from './play.js'
import * as drafts from './drafts.js'
import { renderAll } from './markdown.js'
import { attempt, composer, practiceNotice, ready, showError } from './ui.js'
import { title } from './character.js'
import { AI_OUTPUT, applyDisplay, displayScripts } from './regex.js'
import { variablesGrid } from './mvu.js'
import { fillMacros, focusPicker, greetingArticle, greetingsOf } from './greeting.js'

/**
 * Show the opening draft of run `playthroughId` in `main`. `onStarted(firstSend)` runs once the
 * first send has its session: `firstSend` is materialize's receipt with the `text` to send, or
 * `null` when another tab started the run.
 */
export function openingView(main, playthroughId, { onStarted }) {
  let character = null
  let draftId = null
  let answer = null
  let scripts = []
  let started = false
  let sending = false // this tab's own first send is under way (its changes are not news)
  const draftKey = `innkeeper.webui.draft.${playthroughId}`

  const log = h('div', { class: 'log', role: 'log', 'aria-label': t('message') + 's' })
  const notice = h('div', { class: 'notice' })
  const { box, button: sendButton } = composer(draftKey, () => send())
  const varsEl = h('div')
  const vars = h('section', { class: 'opening-variables', 'aria-label': t('openingVariables'), hidden: true }, varsEl)
  const grid = variablesGrid(varsEl, {
    title: t('openingVariables'), label: t('openingVariables'), filterId: 'opening-filter', emptyText: t('noVariables'),
  })
  const heading = h('h1', {}, '')
  const backLink = h('a', { href: '#/library' }, `← ${t('back')}`)

  const editable = () => answer && answer.draft.status === 'open'

  async function pickGreeting(index) {
    const updated = await attempt(() => drafts.selectGreeting(draftId, index))
    if (updated === undefined) return
    answer = updated
    await draw()
    focusPicker(log, index)
  }

  async function saveVariable(greetingIndex, path, text) {
    try {
      answer = await drafts.setVariable(draftId, greetingIndex, path, text)
      grid.drafts.delete(path)
      announce(t('saved'))
    } catch (err) {
      showError(err) // what was typed stays in its box
      answer = await drafts.read(draftId).catch(() => answer)
    }
    drawVariables()
  }

  async function resetVariables(greetingIndex) {
    const updated = await attempt(() => drafts.resetVariables(draftId, greetingIndex))
    if (updated === undefined) return
    answer = updated
    grid.drafts.clear()
    drawVariables()
  }

  function drawVariables() {
    const opening = answer.opening
    vars.hidden = !opening || opening.variables === null || opening.variables === undefined
    if (vars.hidden) return
    const index = opening.greetingIndex
    const data = opening.variables.stat_data !== undefined ? opening.variables.stat_data : opening.variables
    grid.show(data, { save: editable() ? (path, text) => saveVariable(index, path, text) : null })
    if (opening.edited && editable()) {
      varsEl.append(h('p', {}, h('span', { class: 'muted' }, t('edited')), ' ',
        h('button', { type: 'button', class: 'small', onclick: () => resetVariables(index) }, t('resetVariables'))))
    }
  }

  // Only the newest draw mounts: a greeting picked, then another, never shows the first.
  const draw = newestOnly(async (stale) => {
    if (!character || !answer) return
    const index = answer.draft.selection.greetingIndex
    const all = greetingsOf(character)
    const text = fillMacros(applyDisplay(all[Math.min(index, all.length - 1)] || '', scripts, AI_OUTPUT), character)
    const [html] = await renderAll([text])
    if (stale()) return
    mount(log, greetingArticle(character, html, index, editable() ? pickGreeting : null))
    drawVariables()
    // A first send was reserved (this tab's answer was lost, or another tab's send failed):
    // Send again continues it; "Back to opening" releases it so the opening can change again.
    mount(notice, editable() ? null : h('p', {}, t('firstSendPending'), ' ',
      h('button', { type: 'button', onclick: back }, t('backToOpening'))))
    heading.textContent = title(play.playthrough(playthroughId))
  })

  async function back() {
    const released = await attempt(() => drafts.backToOpening(draftId))
    if (released === undefined) return
    answer = released
    if (!box.value && released.draft.lastInput) {
      box.value = released.draft.lastInput
      sessionStorage.setItem(draftKey, box.value)
    }
    await draw()
  }

  function start(receipt, text) {
    if (started) return
    started = true
    onStarted(receipt ? { ...receipt, text } : null)
  }

  async function send() {
    const text = box.value
    if (!text.trim() || !answer) return
    sendButton.disabled = true
    sending = true
    try {
      start(await drafts.reserve(draftId, text), text)
    } catch (err) {
      showError(err) // the text stays in the box
      answer = await drafts.read(draftId).catch(() => answer)
      if (answer.draft.status === 'materialized' && err.code === 'DRAFT_MATERIALIZED') return start(null)
      await draw()
    } finally {
      sending = false
      sendButton.disabled = false
    }
  }

  mount(main,
    h('div', { class: 'play' },
      h('div', { class: 'chat' },
        h('div', { class: 'chat-head' }, backLink, heading, h('span', { class: 'spacer' })),
        h('p', { class: 'muted' }, t('openingHint')),
        practiceNotice(), log, vars, notice,
        h('div', { class: 'composer' }, box, h('div', { class: 'composer-actions' }, sendButton)))))

  const off = drafts.onChange(() => {
    if (!draftId || started || sending) return
    drafts.load(draftId).then((fresh) => {
      answer = fresh
      // Another tab sent the first message: this one follows into the chat.
      if (fresh.draft.status === 'materialized') start(null)
      else draw()
    }, showError)
  })
  attempt(async () => {
    const row = play.playthrough(playthroughId)
    draftId = play.draftIdOf(row)
    backLink.href = `#/character/${encodeURIComponent(play.characterIdOf(row))}`
    const [card, loaded, display] = await Promise.all([
      characters.get(play.characterIdOf(row)), drafts.load(draftId), displayScripts(null, play.characterIdOf(row))])
    character = card.character
    answer = loaded
    scripts = display
    if (!box.value && answer.draft.lastInput && answer.draft.status === 'open') box.value = answer.draft.lastInput
    await draw()
    ready('play')
    box.focus()
  })
  return () => {
    started = true
    off()
  }
}
