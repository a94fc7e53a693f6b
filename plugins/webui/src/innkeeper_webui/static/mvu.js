// The MVU variables table of the Why panel: 20 rows a page, a path filter; a past round's values
// read-only (its snapshot), the current values editable with the revision read and a fresh
// operationId. A conflict keeps the draft and shows the server's message.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { mvu } from './api.js'
import { showError } from './ui.js'

const ROWS = 20

/** Leaf paths of a variables object: [['角色.好感度', 10], …] (arrays and scalars are leaves). */
export function flatten(value, prefix = '', out = []) {
  if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length) {
    for (const [key, child] of Object.entries(value)) flatten(child, prefix ? `${prefix}.${key}` : key, out)
  } else if (prefix) {
    out.push([prefix, value])
  }
  return out
}

/** `root` with `path` (dot-separated) set to `value` (in place). */
export function setPath(root, path, value) {
  const keys = path.split('.')
  let node = root
  for (const key of keys.slice(0, -1)) node = node[key]
  node[keys[keys.length - 1]] = value
}

/** What the player typed in a value box: JSON when it parses, else the text itself. */
export function parseValue(text) {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * A paged table of leaf paths with a path filter, drawn into `el`: read-only, or editable (an
 * input per value, saved with Enter or its Save button through `onSave(path, text)`). What is
 * typed stays in `drafts` until a save succeeds, so a failed save or a redraw loses nothing.
 */
export function variablesGrid(el, { title, label, filterId, emptyText }) {
  let rows = []
  let filter = ''
  let page = 0
  let editable = false
  let readOnlyNote = false
  let onSave = null
  const drafts = new Map()

  function draw() {
    const shown = rows.filter(([path]) => path.includes(filter))
    const pages = Math.max(1, Math.ceil(shown.length / ROWS))
    page = Math.min(page, pages - 1)
    const slice = shown.slice(page * ROWS, page * ROWS + ROWS)
    const body = slice.map(([path, value]) => {
      const text = drafts.has(path) ? drafts.get(path) : JSON.stringify(value)
      const cell = editable
        ? h('td', {}, h('input', { type: 'text', value: text, 'aria-label': path, oninput: (ev) => drafts.set(path, ev.target.value),
            onkeydown: (ev) => { if (ev.key === 'Enter') onSave(path, ev.target.value) } }),
          h('button', { type: 'button', class: 'small', onclick: (ev) => onSave(path, ev.target.previousSibling.value) }, t('save')))
        : h('td', {}, text)
      return h('tr', {}, h('td', {}, path), cell)
    })
    mount(el,
      h('h3', {}, title, readOnlyNote ? ` (${t('readOnly')})` : ''),
      h('span', { class: 'field' }, h('label', { for: filterId }, t('pathFilter')),
        h('input', { id: filterId, type: 'search', value: filter, oninput: (ev) => { filter = ev.target.value; page = 0; draw(); el.querySelector(`#${filterId}`).focus() } })),
      rows.length ? h('table', { 'aria-label': label }, h('tbody', {}, body)) : h('p', { class: 'muted' }, emptyText),
      pages > 1 ? h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'small', disabled: page === 0, onclick: () => { page -= 1; draw() } }, t('previousPage')),
        h('span', { class: 'muted' }, `${page + 1}/${pages}`),
        h('button', { type: 'button', class: 'small', disabled: page >= pages - 1, onclick: () => { page += 1; draw() } }, t('nextPage'))) : null)
  }

  return {
    drafts,
    /** Show `data` (a stat_data object): editable when `save` is given, else read-only. */
    show(data, { save = null, readOnly = false } = {}) {
      rows = flatten(data || {})
      editable = Boolean(save)
      readOnlyNote = readOnly
      onSave = save
      draw()
    },
  }
}

/**
 * Fill `el` with the variables of `sessionId`: at `replySeq` (a past round, read-only) or now.
 */
export async function variablesTable(el, sessionId, replySeq) {
  const scope = { authority: 'local', sessionId }
  let data = null
  let resource = null
  const editable = replySeq === null || replySeq === undefined
  const grid = variablesGrid(el, { title: t('variables'), label: t('variables'), filterId: 'mvu-filter', emptyText: t('noVariables') })
  try {
    // A session without MVU state lists no resources (asking for a snapshot would be a 404).
    const { resources } = await mvu.resources(scope)
    if (resources.length && !editable) {
      const { snapshot } = await mvu.snapshot({ sessionId, endEventId: replySeq, sessionFormatVersion: 4 })
      data = snapshot.variables && snapshot.variables.stat_data !== undefined ? snapshot.variables.stat_data : snapshot.variables
    } else if (resources.length) {
      resource = (await mvu.resource(resources[0].id, scope)).resource
      data = resource.content ? resource.content.stat_data : null
    }
  } catch (err) {
    if (err.code === 'MVU_NOT_FOUND' || err.code === 'MVU_HISTORY_UNAVAILABLE') data = null
    else return mount(el, h('p', { class: 'muted' }, `${err.message} (${err.code})`))
  }

  async function save(path, text) {
    const next = structuredClone(data)
    setPath(next, path, parseValue(text))
    try {
      const r = await mvu.update({
        id: resource.id, scope, content: { stat_data: next }, expectedRevision: resource.revision,
        operationId: `webui-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
      })
      resource = r.resource
      data = resource.content.stat_data
      grid.drafts.delete(path)
      announce(t('saved'))
    } catch (err) {
      showError(err) // the draft stays in its box
      if (err.code === 'MVU_REVISION_CONFLICT') {
        const fresh = (await mvu.resource(resource.id, scope)).resource
        resource = fresh
        data = fresh.content.stat_data
      }
    }
    draw()
  }

  function draw() {
    grid.show(data, { save: editable && resource ? save : null, readOnly: !editable })
  }
  draw()
}
