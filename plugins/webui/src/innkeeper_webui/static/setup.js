// Session setup: bind a preset, a persona and world books to the session shown; session
// templates (choose one, apply it here, save this session as one, start a new chat from it). A
// bind refused while a reply runs (409 *_AGENT_RUNNING) is shown as a message, not an error; an
// apply the server refuses because the session belongs to a playthrough of another card
// (409 CHARACTER_PLAYTHROUGH_DETACH_REQUIRED) is shown beside the button, with what conflicts.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { presets, templates, users, worldBooks } from './api.js'
import { title } from './character.js'
import * as play from './play.js'
import { labelledSelect, showError } from './ui.js'

/** The conflicts of a refused apply, one sentence each (docs/play.md "Playthroughs"). */
function conflictText(err, chosen) {
  const conflicts = (err.details && err.details.error && err.details.error.details &&
    err.details.error.details.conflicts) || []
  const card = chosen.contents && chosen.contents.characterCard
  const requested = card ? card.name : t('noCharacter')
  return conflicts.map((c) => {
    const row = play.playthrough(c.playthroughId)
    const run = row ? title(row) : (c.playthroughTitle || c.playthroughId)
    const expected = (row && row.ext && row.ext.pmpDshTavern && row.ext.pmpDshTavern.characterName) ||
      c.expectedCharacterId
    return t('templateConflict', { run, expected, requested })
  })
}

function report(err) {
  if (err.status === 409 && /_AGENT_RUNNING$/.test(err.code || '')) announce(`${err.message} (${err.code})`)
  else showError(err)
}

async function bind(fn) {
  try {
    await fn()
    announce(t('saved'))
    return true
  } catch (err) {
    report(err)
    return false
  }
}

export function setupPanel(sessionId, { onNewChat, onNewChatFromTemplate }) {
  const el = h('section', { id: 'setup-panel', class: 'panel', 'aria-label': t('sessionSetup'), tabindex: '-1', hidden: true })
  const note = h('p', { class: 'muted', role: 'status' })

  async function refresh() {
    const sid = sessionId()
    if (!sid) return
    let p, u, us, w, ws, tp
    try {
      ;[p, u, us, w, ws, tp] = await Promise.all([presets.list(sid), users.list(), users.selection(sid), worldBooks.list(),
        worldBooks.selection(sid), templates.list()])
    } catch (err) {
      showError(err)
      return
    }
    const chosenBooks = new Set(ws.selection ? ws.selection.worldBookIds : [])
    mount(el, h('h2', {}, t('sessionSetup')),
      labelledSelect(t('preset'), [['', t('none')], ...p.presets.map((x) => [x.id, x.name])], p.selectedId || '',
        (v) => bind(() => presets.select(v || null, sid))),
      labelledSelect(t('persona'), [['', t('none')], ...u.users.map((x) => [x.id, x.name])], (us.selection && us.selection.userId) || '',
        (v) => bind(() => users.select(sid, v || null))),
      h('fieldset', {}, h('legend', {}, t('worldBooks')),
        w.worldBooks.map((b) => h('label', { class: 'check' },
          h('input', { type: 'checkbox', checked: chosenBooks.has(b.id), onchange: async (ev) => {
            if (ev.target.checked) chosenBooks.add(b.id)
            else chosenBooks.delete(b.id)
            if (!(await bind(() => worldBooks.select(sid, [...chosenBooks])))) refresh()
          } }), ' ', b.name))),
      h('button', { type: 'button', onclick: onNewChat }, t('newChatCurrent')),
      templateFields(sid, tp),
      note)
  }

  function templateFields(sid, tp) {
    const chosen = tp.templates.find((x) => x.id === tp.selectedId) || null
    const name = h('input', { type: 'text', maxlength: 120, 'aria-label': t('templateName') })
    const conflict = h('div', { class: 'notice', role: 'alert', 'aria-label': t('templateNotApplied'), hidden: true })
    const save = async () => {
      if (!name.value.trim()) return
      if (await bind(() => templates.saveFrom(name.value.trim(), sid))) refresh()
    }
    return h('fieldset', {}, h('legend', {}, t('templates')),
      labelledSelect(t('template'), [['', t('none')], ...tp.templates.map((x) => [x.id, x.name])], tp.selectedId || '',
        async (v) => {
          if (await bind(() => templates.select(v || null))) refresh()
        }),
      conflict,
      h('div', { class: 'actions' },
        h('button', { type: 'button', disabled: !chosen, onclick: async () => {
          conflict.hidden = true
          try {
            await templates.applyTemplate(sid, chosen.id)
          } catch (err) {
            if (err.status === 409 && err.code === 'CHARACTER_PLAYTHROUGH_DETACH_REQUIRED') {
              mount(conflict, h('strong', {}, t('templateNotApplied')),
                h('ul', {}, conflictText(err, chosen).map((line) => h('li', {}, line))))
              conflict.hidden = false
              return
            }
            report(err)
            return
          }
          announce(t('saved'))
          refresh()
        } }, t('applyTemplate')),
        h('button', { type: 'button', disabled: !chosen, onclick: () => onNewChatFromTemplate(chosen.id) },
          t('newChatTemplate')),
        chosen ? h('a', { href: templates.exportUrl(chosen.id), download: '' }, t('export')) : null),
      h('div', { class: 'actions' }, name,
        h('button', { type: 'button', onclick: save }, t('saveTemplate'))))
  }

  return { el, refresh }
}
