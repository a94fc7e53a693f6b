// A playthrough's menu in the chat header: rename, duplicate, export the chat as a SillyTavern
// .jsonl, import one as a new playthrough of this character.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import * as play from './play.js'
import { exportChat, download, importChat } from './chatfile.js'
import { attempt, go, showError } from './ui.js'

/** A file name for `title` (no path separators or control characters). */
export const fileName = (title) => `${title.replace(/[\u0000-\u001f\u007f/\\:*?"<>|]+/g, '_').slice(0, 120) || 'chat'}.jsonl`

/**
 * The "Import chat" control: a button and the file input it opens. `character()` is the card
 * the chat becomes a playthrough of; the new run opens when it is imported.
 */
export function importChatControl(character) {
  const input = h('input', { type: 'file', accept: '.jsonl,application/jsonl,application/x-ndjson,text/plain', 'aria-label': t('chatFile'), class: 'visually-hidden',
    onchange: async (ev) => {
      const file = ev.target.files[0]
      ev.target.value = ''
      if (!file) return
      announce(t('importingChat'))
      const id = await attempt(() => importChat(file, character()))
      if (id) {
        announce(t('chatImported'))
        go(`#/play/${encodeURIComponent(id)}`)
      }
    } })
  const button = h('button', { type: 'button', onclick: () => input.click() }, t('importChat'))
  return h('span', { class: 'import-chat' }, button, input)
}

export function playthroughMenu(playthroughId, { character, greetingIndex, title }) {
  const el = h('div', { id: 'run-menu', class: 'run-menu', role: 'group', 'aria-label': t('playthroughMenu'), hidden: true })
  const button = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'run-menu', onclick: () => {
    const open = el.hidden
    el.hidden = !open
    button.setAttribute('aria-expanded', String(open))
    if (open) draw()
  } }, t('playthroughMenu'))

  function draw() {
    const nameId = 'run-name'
    const name = h('input', { id: nameId, type: 'text', maxlength: 200 })
    name.value = title()
    mount(el,
      h('span', { class: 'field' }, h('label', { for: nameId }, t('playthroughName')), name,
        h('button', { type: 'button', onclick: async () => {
          if (await attempt(() => play.rename(playthroughId, name.value)) !== undefined) announce(t('saved'))
        } }, t('rename'))),
      h('button', { type: 'button', onclick: async () => {
        const id = await attempt(() => play.duplicate(playthroughId, character(), t('copyOf', { title: title() })))
        if (id) go(`#/play/${encodeURIComponent(id)}`)
      } }, t('duplicate')),
      h('button', { type: 'button', onclick: async () => {
        try {
          download(fileName(title()), await exportChat(playthroughId, character(), greetingIndex()))
          announce(t('chatExported'))
        } catch (err) {
          showError(err)
        }
      } }, t('exportChat')),
      importChatControl(character))
  }

  return { el, button }
}
