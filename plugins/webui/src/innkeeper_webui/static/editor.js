// The character editor (#/edit/new, #/edit/:id): every field of a card, the alternate greetings
// (add, remove, reorder), the depth prompt, the avatar (the server crops it to the card's 2:3),
// the linked world books, and PNG/JSON export. Edits are compare-and-set on the card's revision:
// a card changed elsewhere meanwhile is refused (409) and the edit stays in the form.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { characters, worldBooks } from './api.js'
import { attempt, avatar, go, ready, showError } from './ui.js'

/** The card's text fields: [wire name, label key, rows (0 = one line)]. */
const TEXT_FIELDS = [
  ['name', 'fieldName', 0],
  ['description', 'fieldDescription', 6],
  ['personality', 'fieldPersonality', 3],
  ['scenario', 'fieldScenario', 3],
  ['firstMessage', 'fieldFirstMessage', 5],
]
const MORE_FIELDS = [
  ['messageExample', 'fieldExampleDialogue', 5],
  ['systemPrompt', 'fieldSystemPrompt', 3],
  ['postHistoryInstructions', 'fieldPostHistory', 3],
  ['creatorNotes', 'fieldCreatorNotes', 3],
  ['creator', 'fieldCreator', 0],
  ['characterVersion', 'fieldVersion', 0],
]
const AVATAR_TYPES = ['image/png', 'image/jpeg', 'image/webp']
const ROLES = ['system', 'user', 'assistant']

let uid = 0
const newId = () => `ed-${++uid}`

/** A labelled text box: the label names it (the tests find it by that name). */
function textField(label, value, rows, oninput) {
  const id = newId()
  const control = rows
    ? h('textarea', { id, rows, oninput: (ev) => oninput(ev.target.value) })
    : h('input', { id, type: 'text', oninput: (ev) => oninput(ev.target.value) })
  control.value = value
  return h('div', { class: 'edit-field' }, h('label', { for: id }, label), control)
}

/** The form's starting values from a stored card (or empty for a new one). */
function fromCard(card) {
  const d = (card && card.data) || {}
  const depth = (d.extensions && d.extensions.depth_prompt) || {}
  const form = { tags: (d.tags || []).join(', '), alternateGreetings: [...(d.alternateGreetings || [])] }
  for (const [key] of [...TEXT_FIELDS, ...MORE_FIELDS]) form[key] = d[key] || ''
  form.depthPrompt = {
    prompt: typeof depth.prompt === 'string' ? depth.prompt : '',
    depth: Number.isInteger(depth.depth) && depth.depth >= 0 ? depth.depth : 4,
    role: ROLES.includes(depth.role) ? depth.role : 'system',
  }
  return form
}

/** What PATCH/POST get: every field the form edits. */
function toFields(form) {
  const fields = {}
  for (const [key] of [...TEXT_FIELDS, ...MORE_FIELDS]) fields[key] = form[key]
  fields.name = form.name.trim()
  fields.tags = form.tags.split(',').map((x) => x.trim()).filter(Boolean)
  fields.alternateGreetings = [...form.alternateGreetings]
  fields.depthPrompt = { ...form.depthPrompt }
  return fields
}

/** Why the form cannot be saved as it is (checked before anything is sent), or null. */
function problem(form) {
  if (!form.name.trim()) return t('nameRequired')
  const d = form.depthPrompt.depth
  if (!Number.isInteger(d) || d < 0 || d > 9999) return t('depthInvalid')
  return null
}

export function editorView(main, characterId) {
  let card = null
  let revision = null
  let form = fromCard(null)
  let picture = null // {bytes, type, url} chosen and not yet uploaded
  let linked = new Set()
  let books = []
  const message = h('div', { class: 'notice', role: 'alert', hidden: true })
  const body = h('form', { class: 'editor-form', 'aria-label': t('characterEditor'), onsubmit: (ev) => { ev.preventDefault(); save() } })

  function say(text, kind = 'failed') {
    message.className = `notice ${kind}`
    mount(message, h('span', {}, text))
    message.hidden = !text
    if (text) message.scrollIntoView({ block: 'nearest' })
  }

  function greetings() {
    const list = h('ol', { class: 'greetings', 'aria-label': t('alternateGreetings') })
    const redraw = (focusIndex, label) => {
      mount(list, form.alternateGreetings.map(item))
      const target = focusIndex === null ? null : list.children[focusIndex]
      if (target) (target.querySelector(`button[aria-label="${label}"]`) || target.querySelector('textarea')).focus()
    }
    const move = (i, delta) => {
      const j = i + delta
      if (j < 0 || j >= form.alternateGreetings.length) return
      const g = form.alternateGreetings
      ;[g[i], g[j]] = [g[j], g[i]]
      redraw(j, delta < 0 ? t('moveUp') : t('moveDown'))
    }
    const item = (text, i) => {
      const id = newId()
      const area = h('textarea', { id, rows: 3, oninput: (ev) => { form.alternateGreetings[i] = ev.target.value } })
      area.value = text
      return h('li', {},
        h('label', { for: id }, t('alternateGreetingN', { n: i + 1 })), area,
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'small', 'aria-label': t('moveUp'), disabled: i === 0, onclick: () => move(i, -1) }, '↑'),
          h('button', { type: 'button', class: 'small', 'aria-label': t('moveDown'), disabled: i === form.alternateGreetings.length - 1, onclick: () => move(i, 1) }, '↓'),
          h('button', { type: 'button', class: 'small', onclick: () => {
            form.alternateGreetings.splice(i, 1)
            redraw(Math.min(i, form.alternateGreetings.length - 1), t('removeGreeting'))
          } }, t('removeGreeting'))))
    }
    redraw(null)
    return h('fieldset', {}, h('legend', {}, t('alternateGreetings')), list,
      h('button', { type: 'button', onclick: () => {
        form.alternateGreetings.push('')
        redraw(form.alternateGreetings.length - 1, null)
      } }, t('addGreeting')))
  }

  function depthFields() {
    const depthId = newId()
    const roleId = newId()
    const depth = h('input', { id: depthId, type: 'number', min: 0, max: 9999, step: 1, value: String(form.depthPrompt.depth),
      oninput: (ev) => { form.depthPrompt.depth = ev.target.value === '' ? NaN : Number(ev.target.value) } })
    const role = h('select', { id: roleId, onchange: (ev) => { form.depthPrompt.role = ev.target.value } },
      ROLES.map((r) => h('option', { value: r, selected: r === form.depthPrompt.role }, t(`role_${r}`))))
    return h('fieldset', {}, h('legend', {}, t('depthPromptTitle')),
      textField(t('fieldDepthPrompt'), form.depthPrompt.prompt, 3, (v) => { form.depthPrompt.prompt = v }),
      h('div', { class: 'toolbar' },
        h('span', { class: 'field' }, h('label', { for: depthId }, t('fieldDepth')), depth),
        h('span', { class: 'field' }, h('label', { for: roleId }, t('fieldRole')), role)))
  }

  function avatarField() {
    const id = newId()
    const img = h('img', { class: 'avatar-preview', alt: t('avatarPreview'), width: 120, height: 180,
      ...(picture ? { src: picture.url } : card ? avatar(card.id) : { hidden: true }) })
    const input = h('input', { id, type: 'file', accept: AVATAR_TYPES.join(','), onchange: async (ev) => {
      const file = ev.target.files[0]
      if (!file) return
      if (!AVATAR_TYPES.includes(file.type)) {
        ev.target.value = ''
        return say(t('avatarWrongType', { name: file.name }))
      }
      if (picture) URL.revokeObjectURL(picture.url)
      picture = { bytes: new Uint8Array(await file.arrayBuffer()), type: file.type, url: URL.createObjectURL(file) }
      img.src = picture.url
      img.hidden = false
      say('')
    } })
    return h('fieldset', {}, h('legend', {}, t('avatar')),
      h('div', { class: 'avatar-row' }, img,
        h('div', {}, h('label', { for: id }, t('chooseAvatar')), ' ', input, h('p', { class: 'muted' }, t('avatarHint')))))
  }

  function bookFields() {
    const embedded = card && card.data.characterBook
    const count = embedded && Array.isArray(embedded.entries) ? embedded.entries.length : 0
    return h('fieldset', {}, h('legend', {}, t('linkedWorldBooks')),
      books.length ? books.map((b) => h('label', { class: 'check' },
        h('input', { type: 'checkbox', checked: linked.has(b.id), onchange: (ev) => {
          if (ev.target.checked) linked.add(b.id)
          else linked.delete(b.id)
        } }), ' ', b.name)) : h('p', { class: 'muted' }, t('noWorldBooks')),
      h('p', { class: 'muted' }, embedded ? t('embeddedBook', { n: count }) : t('noEmbeddedBook')))
  }

  function draw() {
    const fields = (list) => list.map(([key, label, rows]) => textField(t(label), form[key], rows, (v) => { form[key] = v }))
    mount(body,
      fields(TEXT_FIELDS),
      greetings(),
      fields(MORE_FIELDS.slice(0, 4)),
      textField(t('fieldTags'), form.tags, 0, (v) => { form.tags = v }),
      fields(MORE_FIELDS.slice(4)),
      depthFields(),
      avatarField(),
      bookFields(),
      message, // beside the Save button that reports here
      h('div', { class: 'toolbar' },
        h('button', { type: 'submit', class: 'primary' }, t('saveCharacter')),
        card ? h('a', { class: 'button', href: characters.exportPngUrl(card.id), download: '' }, t('exportPng')) : null,
        card ? h('a', { class: 'button', href: characters.exportJsonUrl(card.id), download: '' }, t('exportJson')) : null,
        card ? h('button', { type: 'button', onclick: () => reload() }, t('discardEdits')) : null))
  }

  let saving = false
  async function save() {
    if (saving) return
    const wrong = problem(form)
    if (wrong) return say(wrong)
    saving = true
    try {
      let id = card && card.id
      if (!card) {
        card = (await characters.create(toFields(form))).character
        id = card.id
        revision = (await characters.get(id)).character.revision
      } else {
        const saved = (await characters.update(id, toFields(form), revision)).character
        card = saved
        revision = saved.revision
      }
      if (picture) {
        const saved = (await characters.setAvatar(id, picture.bytes, picture.type, revision)).character
        card = saved
        revision = saved.revision
        URL.revokeObjectURL(picture.url)
        picture = null
      }
      await characters.setWorldBooks(id, [...linked])
      say('')
      announce(t('saved'))
      if (!characterId) return go(`#/character/${encodeURIComponent(id)}`)
      draw()
      say(t('characterSaved'), 'saved')
    } catch (err) {
      if (err.code === 'RESOURCE_REVISION_CONFLICT') {
        // Keep the form as typed; the next Save replaces the other change on purpose.
        const fresh = await characters.get(card.id).catch(() => null)
        if (fresh) revision = fresh.character.revision
        say(t('characterConflict', { code: err.code }))
      } else {
        say(`${t('error')}: ${err.message} (${err.code || 'ERROR'})`)
      }
    } finally {
      saving = false
    }
  }

  async function load() {
    const [list, r, bound] = await Promise.all([
      worldBooks.list(),
      characterId ? characters.get(characterId) : null,
      characterId ? characters.worldBooks(characterId) : null,
    ])
    books = list.worldBooks
    if (r) {
      card = r.character
      revision = card.revision
      form = fromCard(card)
      linked = new Set(bound.binding.worldBookIds)
    }
    draw()
  }

  async function reload() {
    if (picture) URL.revokeObjectURL(picture.url)
    picture = null
    say('')
    await attempt(load)
  }

  const back = characterId ? `#/character/${encodeURIComponent(characterId)}` : '#/library'
  mount(main,
    h('p', {}, h('a', { href: back }, `← ${t('back')}`)),
    h('h1', {}, characterId ? t('editCharacter') : t('newCharacter')),
    body)
  attempt(load).then(() => ready('editor'), showError)
  return () => { if (picture) URL.revokeObjectURL(picture.url) }
}
