// Personas (#/personas): the player's users — create, edit (name, description and where the
// description goes in the prompt), avatar, the persona's lore book, and the default persona of
// new chats. Binding a persona to one chat is the chat's Session setup (setup.js).

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { users, worldBooks } from './api.js'
import { attempt, ready } from './ui.js'

const POSITIONS = ['inPrompt', 'atDepth', 'none']
const ROLES = ['system', 'user', 'assistant']
const AVATAR_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif']
/** The server keeps avatars of at most 128 KiB (decoded): pictures are made to fit here. */
const AVATAR_MAX_BYTES = 128 * 1024
/** A persona's picture is the card shape (2:3), small enough for the limit. */
const AVATAR_SIZE = [200, 300]

let uid = 0
const newId = () => `pe-${++uid}`

function labelled(label, control) {
  control.id = newId()
  return h('div', { class: 'edit-field' }, h('label', { for: control.id }, label), control)
}

/** `file` centre-cropped to 2:3, scaled to AVATAR_SIZE, as a data URI the server accepts. */
async function avatarUri(file) {
  const bitmap = await createImageBitmap(file)
  const [w, h2] = AVATAR_SIZE
  const scale = Math.min(bitmap.width / 2, bitmap.height / 3)
  const sw = scale * 2
  const sh = scale * 3
  const canvas = document.createElement('canvas')
  canvas.width = w
  canvas.height = h2
  canvas.getContext('2d').drawImage(bitmap, (bitmap.width - sw) / 2, (bitmap.height - sh) / 2, sw, sh, 0, 0, w, h2)
  for (const quality of [0.9, 0.75, 0.5]) {
    const uri = canvas.toDataURL('image/webp', quality)
    if (uri.startsWith('data:image/webp') && (uri.length - uri.indexOf(',') - 1) * 0.75 <= AVATAR_MAX_BYTES) return uri
  }
  return canvas.toDataURL('image/jpeg', 0.6)
}

export function personasView(main) {
  let list = []
  let defaultId = null
  let books = []
  let editing = null // {id|null, form} while the editor is open
  const listBox = h('ul', { class: 'plain personas', 'aria-label': t('personas') })
  const editor = h('section', { class: 'persona-editor', 'aria-label': t('personaEditor'), hidden: true })
  const message = h('div', { class: 'notice failed', role: 'alert', hidden: true })

  function say(text) {
    mount(message, h('span', {}, text))
    message.hidden = !text
  }

  function drawList() {
    mount(listBox, list.map((u) => h('li', { 'aria-label': u.name, class: 'persona-row' },
      u.hasAvatar ? h('img', { class: 'persona-avatar', alt: '', src: '', dataset: { id: u.id } }) : null,
      h('strong', {}, u.name), u.id === defaultId ? h('span', { class: 'muted' }, ` · ${t('defaultPersona')}`) : null, ' ',
      h('span', { class: 'muted' }, (u.descriptionPreview || '').slice(0, 120)), ' ',
      h('button', { type: 'button', class: 'small', 'aria-label': `${t('edit')} ${u.name}`, onclick: () => open(u.id) }, t('edit')),
      u.id === defaultId
        ? h('button', { type: 'button', class: 'small', onclick: () => setDefault(null) }, t('clearDefault'))
        : h('button', { type: 'button', class: 'small', 'aria-label': `${t('setDefault')}: ${u.name}`, onclick: () => setDefault(u.id) }, t('setDefault')))))
    // Avatars are data URIs inside the user document: read them only for personas that have one.
    for (const img of listBox.querySelectorAll('img[data-id]')) {
      users.get(img.dataset.id).then((r) => { if (r.user.avatar) img.src = r.user.avatar }, () => {})
    }
  }

  async function setDefault(id) {
    const r = await attempt(() => users.setDefault(id))
    if (r === undefined) return
    defaultId = r.selection ? r.selection.userId : null
    announce(t('saved'))
    drawList()
  }

  async function open(id) {
    say('')
    let form = { name: '', description: '', descriptionPosition: 'inPrompt', descriptionDepth: 2, descriptionRole: 'system', avatar: null, book: '' }
    if (id) {
      const got = await attempt(async () => [(await users.get(id)).user, (await users.worldBooks(id)).binding.worldBookIds])
      if (!got) return
      const [u, bound] = got
      form = { ...form, ...u, avatar: u.avatar || null, book: bound[0] || '' }
    }
    editing = { id, form }
    drawEditor()
    editor.querySelector('input, textarea')?.focus()
  }

  function drawEditor() {
    const { id, form } = editing
    const name = h('input', { type: 'text', maxlength: 200, oninput: (ev) => { form.name = ev.target.value } })
    name.value = form.name
    const description = h('textarea', { rows: 6, oninput: (ev) => { form.description = ev.target.value } })
    description.value = form.description
    const depthRow = h('div', { class: 'toolbar', hidden: form.descriptionPosition !== 'atDepth' })
    const position = h('select', { onchange: (ev) => {
      form.descriptionPosition = ev.target.value
      depthRow.hidden = form.descriptionPosition !== 'atDepth'
    } }, POSITIONS.map((p) => h('option', { value: p, selected: p === form.descriptionPosition }, t(`position_${p}`))))
    const depth = h('input', { type: 'number', min: 0, max: 9999, step: 1, value: String(form.descriptionDepth),
      oninput: (ev) => { form.descriptionDepth = ev.target.value === '' ? NaN : Number(ev.target.value) } })
    const role = h('select', { onchange: (ev) => { form.descriptionRole = ev.target.value } },
      ROLES.map((r) => h('option', { value: r, selected: r === form.descriptionRole }, t(`role_${r}`))))
    mount(depthRow, labelled(t('fieldDepth'), depth), labelled(t('fieldRole'), role))
    const preview = h('img', { class: 'avatar-preview', alt: t('avatarPreview'), width: 100, height: 150, src: form.avatar || '', hidden: !form.avatar })
    const picture = h('input', { type: 'file', accept: AVATAR_TYPES.join(','), onchange: async (ev) => {
      const file = ev.target.files[0]
      if (!file) return
      if (!AVATAR_TYPES.includes(file.type)) {
        ev.target.value = ''
        return say(t('avatarWrongType', { name: file.name }))
      }
      try {
        form.avatar = await avatarUri(file)
        preview.src = form.avatar
        preview.hidden = false
        say('')
      } catch {
        say(t('avatarUnreadable', { name: file.name }))
      }
    } })
    const book = h('select', { onchange: (ev) => { form.book = ev.target.value } },
      h('option', { value: '', selected: !form.book }, t('none')),
      books.map((b) => h('option', { value: b.id, selected: b.id === form.book }, b.name)))
    mount(editor,
      h('h2', {}, id ? t('editPersona') : t('newPersona')),
      h('form', { class: 'editor-form', onsubmit: (ev) => { ev.preventDefault(); save() } },
        labelled(t('fieldName'), name),
        labelled(t('fieldDescription'), description),
        labelled(t('descriptionPosition'), position),
        depthRow,
        h('fieldset', {}, h('legend', {}, t('avatar')),
          h('div', { class: 'avatar-row' }, preview,
            h('div', {}, labelled(t('chooseAvatar'), picture),
              h('button', { type: 'button', class: 'small', onclick: () => { form.avatar = null; preview.hidden = true } }, t('removeAvatar'))))),
        labelled(t('personaLoreBook'), book),
        message,
        h('div', { class: 'toolbar' },
          h('button', { type: 'submit', class: 'primary' }, t('savePersona')),
          h('button', { type: 'button', onclick: () => { editing = null; editor.hidden = true; say('') } }, t('cancel')))))
    editor.hidden = false
  }

  let saving = false
  async function save() {
    if (saving || !editing) return
    const { form } = editing
    if (!form.name.trim()) return say(t('personaNameRequired'))
    const d = form.descriptionDepth
    if (form.descriptionPosition === 'atDepth' && !(Number.isInteger(d) && d >= 0 && d <= 9999)) return say(t('depthInvalid'))
    const fields = {
      name: form.name.trim(), description: form.description, avatar: form.avatar,
      descriptionPosition: form.descriptionPosition,
      descriptionDepth: Number.isInteger(d) ? d : 2, descriptionRole: form.descriptionRole,
    }
    saving = true
    try {
      const saved = editing.id ? await users.update(editing.id, fields) : await users.create(fields)
      editing.id = saved.user.id // a failed lore-book write below keeps the persona made
      await users.setWorldBooks(saved.user.id, form.book ? [form.book] : [])
      editing = null
      editor.hidden = true
      say('')
      announce(t('saved'))
      await load()
    } catch (err) {
      say(`${t('error')}: ${err.message} (${err.code || 'ERROR'})`) // the form keeps what was typed
    } finally {
      saving = false
    }
  }

  async function load() {
    const [u, d, w] = await Promise.all([users.list(), users.defaultOne(), worldBooks.list()])
    list = u.users
    defaultId = d.selection ? d.selection.userId : null
    books = w.worldBooks
    drawList()
  }

  mount(main,
    h('p', {}, h('a', { href: '#/library' }, `← ${t('library')}`)),
    h('h1', {}, t('personas')),
    h('p', { class: 'muted' }, t('personasHint')),
    h('div', { class: 'toolbar' }, h('button', { type: 'button', onclick: () => open(null) }, t('newPersona'))),
    listBox, editor)
  attempt(load).then(() => ready('personas'))
}
