// The chat's Author's Note (docs/webui.md "Author's note"): text, depth, role and frequency,
// stored with the session's selection (`/pmp-dsh-tavern/api/v1/authors-note`), copied to swipes
// and branches with it, placed by the prompt at that depth (SillyTavern's floating prompt).

import { h, mount, announce } from './core.js'
import { extendText, t } from './i18n.js'
import { showError } from './ui.js'

extendText({
  en: {
    authorsNote: "Author's note", noteText: 'Note text', noteDepth: 'Depth', noteRole: 'Role',
    noteInterval: 'Every N user messages', saveNote: 'Save note', clearNote: 'Remove note',
    noteHint: 'Placed this many messages before the end of the chat; every N-th user message (1: always, 0: never).',
    noteBad: '{field} must be a whole number from 0 to 10000.', noteBusy: 'A reply is running; save the note after it ends.',
    noteInWhy: "Author's note: depth {depth}, {role}, every {interval} user message(s) — the in-chat:d{depth} section below",
  },
  zh: {
    authorsNote: '作者注释', noteText: '注释内容', noteDepth: '深度', noteRole: '角色', noteInterval: '每 N 条用户消息',
    saveNote: '保存注释', clearNote: '移除注释', noteBusy: '回复进行中；结束后再保存注释。',
  },
})

const call = async (method, path, body) => {
  const response = await fetch(path, {
    method, credentials: 'same-origin', headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  })
  const data = await response.json().catch(() => null)
  if (!response.ok) {
    const err = new Error((data && (data.error && data.error.message ? data.error.message : data.error)) || response.statusText)
    err.status = response.status
    err.code = (data && data.code) || `HTTP_${response.status}`
    throw err
  }
  return data
}
const PATH = '/pmp-dsh-tavern/api/v1/authors-note'

/** The Why panel's line: the chat's note and where it goes (`null` without a note). */
export async function noteWhyLine(sid) {
  const note = (await call('GET', `${PATH}?sessionId=${encodeURIComponent(sid)}`)).authorsNote
  return note ? h('p', { class: 'note-why' }, t('noteInWhy', note)) : null
}

/** The panel, a region named "Author's note"; `sessionId()` names the session shown. */
export function authorsNotePanel(sessionId) {
  const el = h('section', { id: 'authors-note-panel', class: 'panel', 'aria-label': t('authorsNote'), tabindex: '-1', hidden: true })
  const text = h('textarea', { rows: 4, 'aria-label': t('noteText') })
  const depth = h('input', { type: 'text', inputmode: 'numeric', 'aria-label': t('noteDepth'), value: '4' })
  const interval = h('input', { type: 'text', inputmode: 'numeric', 'aria-label': t('noteInterval'), value: '1' })
  const role = h('select', { 'aria-label': t('noteRole') }, ['system', 'user', 'assistant'].map((r) => h('option', { value: r }, r)))
  const message = h('p', { class: 'muted', role: 'status' })
  let loadedFor = null

  function whole(input, field) {
    const raw = input.value.trim()
    if (!/^\d+$/.test(raw) || Number(raw) > 10000) throw new Error(t('noteBad', { field }))
    return Number(raw)
  }

  async function save(note) {
    message.textContent = ''
    let body
    try {
      body = note === null ? null : { text: text.value, depth: whole(depth, t('noteDepth')), role: role.value, interval: whole(interval, t('noteInterval')) }
    } catch (err) {
      message.textContent = err.message // nothing sent; what was typed stays
      return
    }
    try {
      const answer = await call('POST', PATH, { sessionId: sessionId(), authorsNote: body })
      if (!answer.authorsNote) text.value = ''
      message.textContent = t('saved')
      announce(t('saved'))
    } catch (err) {
      message.textContent = err.status === 409 ? t('noteBusy') : `${err.message} (${err.code})`
    }
  }

  async function refresh() {
    const sid = sessionId()
    if (!sid || loadedFor === sid) return
    try {
      const answer = await call('GET', `${PATH}?sessionId=${encodeURIComponent(sid)}`)
      const note = answer.authorsNote
      loadedFor = sid
      if (note) {
        text.value = note.text
        depth.value = String(note.depth)
        role.value = note.role
        interval.value = String(note.interval)
      }
    } catch (err) {
      showError(err)
    }
  }

  const field = (label, input) => h('label', { class: 'field' }, h('span', {}, label), input)
  mount(el, h('h2', {}, t('authorsNote')), field(t('noteText'), text),
    h('div', { class: 'row' }, field(t('noteDepth'), depth), field(t('noteRole'), role), field(t('noteInterval'), interval)),
    h('p', { class: 'muted' }, t('noteHint')),
    h('div', { class: 'actions' },
      h('button', { type: 'button', onclick: () => save({}) }, t('saveNote')),
      h('button', { type: 'button', onclick: () => save(null) }, t('clearNote'))),
    message)
  // A new head session (swipe, branch, delete) carries the note with its selection: read again.
  return { el, refresh: () => { loadedFor = null; return refresh() } }
}
