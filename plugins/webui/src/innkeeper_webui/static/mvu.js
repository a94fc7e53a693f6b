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

function setPath(root, path, value) {
  const keys = path.split('.')
  let node = root
  for (const key of keys.slice(0, -1)) node = node[key]
  node[keys[keys.length - 1]] = value
}

/**
 * Fill `el` with the variables of `sessionId`: at `replySeq` (a past round, read-only) or now.
 */
export async function variablesTable(el, sessionId, replySeq) {
  const scope = { authority: 'local', sessionId }
  let rows = []
  let data = null
  let resource = null
  let filter = ''
  let page = 0
  const drafts = new Map()
  const editable = replySeq === null || replySeq === undefined
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
  rows = flatten(data || {})

  async function save(path, text) {
    let value
    try {
      value = JSON.parse(text)
    } catch {
      value = text
    }
    const next = structuredClone(data)
    setPath(next, path, value)
    try {
      const r = await mvu.update({
        id: resource.id, scope, content: { stat_data: next }, expectedRevision: resource.revision,
        operationId: `webui-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
      })
      resource = r.resource
      data = resource.content.stat_data
      rows = flatten(data)
      drafts.delete(path)
      announce(t('saved'))
    } catch (err) {
      showError(err) // the draft stays in its box
      if (err.code === 'MVU_REVISION_CONFLICT') {
        const fresh = (await mvu.resource(resource.id, scope)).resource
        resource = fresh
        data = fresh.content.stat_data
        rows = flatten(data)
      }
    }
    draw()
  }

  function draw() {
    const shown = rows.filter(([path]) => path.includes(filter))
    const pages = Math.max(1, Math.ceil(shown.length / ROWS))
    page = Math.min(page, pages - 1)
    const slice = shown.slice(page * ROWS, page * ROWS + ROWS)
    const body = slice.map(([path, value]) => {
      const text = drafts.has(path) ? drafts.get(path) : JSON.stringify(value)
      const cell = editable && resource
        ? h('td', {}, h('input', { type: 'text', value: text, 'aria-label': path, oninput: (ev) => drafts.set(path, ev.target.value),
            onkeydown: (ev) => { if (ev.key === 'Enter') save(path, ev.target.value) } }),
          h('button', { type: 'button', class: 'small', onclick: (ev) => save(path, ev.target.previousSibling.value) }, t('save')))
        : h('td', {}, text)
      return h('tr', {}, h('td', {}, path), cell)
    })
    mount(el,
      h('h3', {}, t('variables'), editable ? '' : ` (${t('readOnly')})`),
      h('span', { class: 'field' }, h('label', { for: 'mvu-filter' }, t('pathFilter')),
        h('input', { id: 'mvu-filter', type: 'search', value: filter, oninput: (ev) => { filter = ev.target.value; page = 0; draw(); el.querySelector('#mvu-filter').focus() } })),
      rows.length ? h('table', { 'aria-label': t('variables') }, h('tbody', {}, body)) : h('p', { class: 'muted' }, t('noVariables')),
      pages > 1 ? h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'small', disabled: page === 0, onclick: () => { page -= 1; draw() } }, t('previousPage')),
        h('span', { class: 'muted' }, `${page + 1}/${pages}`),
        h('button', { type: 'button', class: 'small', disabled: page >= pages - 1, onclick: () => { page += 1; draw() } }, t('nextPage'))) : null)
  }
  draw()
}
