// The library: the character grid (search, three sort modes, drag for custom order), import of
// many files with a per-file result table, missing cards with relink, and the preset, world-book
// and persona lists with export.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { EXAMPLE_CARD, characters, exampleCard, presets, worldBooks, users, templates } from './api.js'
import * as play from './play.js'
import { UNPAGED, attempt, avatar, go, labelledSelect, ready, showError } from './ui.js'

/** Cards drawn per step; more are added as the grid scrolls (4,096 cards stay responsive). */
const GRID_STEP = UNPAGED ? Infinity : 120

/** What a file is, from its bytes: SillyTavern formats and the Tavern portable envelopes. */
export async function classify(file) {
  if (/\.png$/i.test(file.name) || file.type === 'image/png') return { kind: 'character' }
  let doc
  const text = await file.text()
  try {
    doc = JSON.parse(text)
  } catch {
    return { kind: 'unknown', reason: 'not JSON or PNG' }
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return { kind: 'unknown', reason: 'not an object' }
  if (doc.format === 'pmp-dsh-tavern') {
    if (doc.resourceType === 'user') return { kind: 'persona', text }
    if (doc.resourceType === 'session-template') return { kind: 'template', text }
    return { kind: 'unknown', reason: `resourceType ${doc.resourceType}` }
  }
  const spec = typeof doc.spec === 'string' ? doc.spec : ''
  if (spec.startsWith('chara_card') || doc.char_name || (typeof doc.name === 'string' && ('first_mes' in doc || 'mes_example' in doc))) {
    return { kind: 'character', text }
  }
  if (doc.entries && typeof doc.entries === 'object') return { kind: 'worldBook', text }
  if (Array.isArray(doc.prompts) || 'main_prompt' in doc || 'prompt_order' in doc) return { kind: 'preset', text }
  return { kind: 'unknown', reason: 'not a card, preset, world book or persona' }
}

async function importOne(file) {
  const what = await classify(file)
  const base = file.name.replace(/\.[^.]+$/, '')
  switch (what.kind) {
    case 'character': {
      const bytes = new Uint8Array(await file.arrayBuffer())
      const type = /\.png$/i.test(file.name) || file.type === 'image/png' ? 'image/png' : 'application/json'
      const r = await characters.importFile(file, bytes, type)
      return { kind: what.kind, name: r.character.name }
    }
    case 'preset':
      return { kind: what.kind, name: (await presets.importText(what.text, base)).preset.name }
    case 'worldBook':
      return { kind: what.kind, name: (await worldBooks.importText(what.text, file.name)).worldBook.name }
    case 'persona':
      return { kind: what.kind, name: (await users.importText(what.text)).user.name }
    case 'template':
      return { kind: what.kind, name: (await templates.importText(what.text)).template.name }
    default:
      return { kind: 'unknown', skipped: what.reason }
  }
}

export function libraryView(main) {
  let catalog = { characters: [], sorting: { mode: 'updated' }, missingCharacters: [] }
  let query = ''
  let shown = GRID_STEP
  let observer = null
  const grid = h('ul', { class: 'grid', 'aria-label': t('characters') })
  const more = h('button', { type: 'button', class: 'more', hidden: true, onclick: () => grow() }, t('showEarlier'))
  more.textContent = '…'
  const count = h('p', { class: 'muted', 'aria-live': 'polite' })
  const results = h('div', { class: 'results' })
  const missing = h('section', { 'aria-label': t('missingCards') })
  const lists = h('div', { class: 'lists' })
  // An empty library says what to do: import a card, or play the bundled example at once.
  const empty = h('section', { class: 'empty-library', 'aria-label': t('tryExample'), hidden: true },
    h('p', {}, t('emptyLibrary')),
    h('button', { type: 'button', class: 'primary', onclick: () => tryExample() }, t('tryExample')))

  /** Import the example card through the card import route and open a playthrough of it. */
  async function tryExample() {
    const id = await attempt(async () => {
      const imported = await characters.importFile({ name: EXAMPLE_CARD }, await exampleCard(), 'application/json')
      return play.create(imported.character)
    })
    if (id) go(`#/play/${encodeURIComponent(id)}`)
  }

  const input = h('input', {
    type: 'file', id: 'import-files', multiple: true, accept: '.png,.json,application/json,image/png',
    onchange: (ev) => runImport([...ev.target.files]).then(() => (ev.target.value = '')),
  })

  function filtered() {
    const q = query.trim().toLowerCase()
    if (!q) return catalog.characters
    return catalog.characters.filter((c) => c.name.toLowerCase().includes(q) || (c.tags || []).some((tag) => tag.toLowerCase().includes(q)))
  }

  function card(c, index) {
    const li = h('li', { class: 'card', 'aria-label': c.name, dataset: { id: c.id } },
      h('a', { href: `#/character/${encodeURIComponent(c.id)}`, onkeydown: (ev) => keyMove(ev, index) },
        h('img', { ...avatar(c.id), alt: '', loading: 'lazy', decoding: 'async', width: 100, height: 150 }),
        h('span', { class: 'name' }, c.name)))
    if (catalog.sorting.mode === 'custom' && !query) {
      li.draggable = true
      li.addEventListener('dragstart', (ev) => ev.dataTransfer.setData('text/plain', c.id))
      li.addEventListener('dragover', (ev) => ev.preventDefault())
      li.addEventListener('drop', (ev) => {
        ev.preventDefault()
        move(ev.dataTransfer.getData('text/plain'), index)
      })
    }
    return li
  }

  function drawGrid() {
    const list = filtered()
    mount(grid, list.slice(0, shown).map(card))
    if (!list.length && catalog.characters.length) grid.append(h('li', { class: 'empty' }, '—'))
    empty.hidden = catalog.characters.length > 0
    more.hidden = list.length <= shown
    count.textContent = `${Math.min(shown, list.length)} / ${list.length} ${t('shown')}`
  }

  function grow() {
    shown += GRID_STEP
    drawGrid()
  }

  async function move(id, toIndex) {
    const ids = catalog.characters.map((c) => c.id)
    const from = ids.indexOf(id)
    if (from < 0 || toIndex < 0 || toIndex >= ids.length || from === toIndex) return
    ids.splice(toIndex, 0, ...ids.splice(from, 1))
    const r = await attempt(() => characters.order('custom', ids))
    if (r) {
      catalog.characters = r.characters
      drawGrid()
      grid.querySelectorAll('a')[toIndex]?.focus()
    }
  }

  // Keyboard reordering in custom mode: Alt+Arrow moves the focused card.
  function keyMove(ev, index) {
    if (!ev.altKey || catalog.sorting.mode !== 'custom' || query) return
    const delta = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1 }[ev.key]
    if (!delta) return
    ev.preventDefault()
    move(catalog.characters[index].id, index + delta)
  }

  async function runImport(files) {
    if (!files.length) return
    const rows = files.map((f) => {
      const status = h('td', {}, t('pending'))
      const kind = h('td', {}, '')
      return { file: f, status, kind, row: h('tr', {}, h('td', {}, f.name), kind, status) }
    })
    mount(results,
      h('table', { 'aria-label': t('importResults') },
        h('caption', {}, t('importResults')),
        h('thead', {}, h('tr', {}, h('th', {}, t('file')), h('th', {}, t('kind')), h('th', {}, t('result')))),
        h('tbody', {}, rows.map((r) => r.row))))
    let done = 0
    for (const r of rows) {
      try {
        const out = await importOne(r.file)
        r.kind.textContent = t(`kind_${out.kind}`)
        r.status.textContent = out.skipped ? `${t('skipped')}: ${out.skipped}` : `${t('imported')}: ${out.name}`
        r.row.className = out.skipped ? 'skipped' : 'ok'
      } catch (err) {
        r.status.textContent = `${t('failed')}: ${err.message} (${err.code || 'ERROR'})`
        r.row.className = 'failed'
      }
      done += 1
      announce(`${t('import')}: ${done}/${rows.length}`)
    }
    await load()
  }

  function drawMissing() {
    if (!catalog.missingCharacters.length) return mount(missing)
    mount(missing, h('h2', {}, t('missingCards')),
      h('ul', {}, catalog.missingCharacters.map((m) => {
        let target = catalog.characters[0] ? catalog.characters[0].id : ''
        return h('li', {}, h('span', {}, m.name),
          labelledSelect(t('relinkTo'), catalog.characters.map((c) => [c.id, c.name]), target, (v) => (target = v)),
          h('button', { type: 'button', disabled: !catalog.characters.length, onclick: async () => {
            if (await attempt(() => characters.relink(m.id, target))) load()
          } }, t('relink')))
      })))
  }

  async function drawLists() {
    const [p, w, u] = await Promise.all([presets.list(), worldBooks.list(), users.list()].map((x) => x.catch((e) => (showError(e), null))))
    const section = (title, items, detail, exportUrl) =>
      h('section', { 'aria-label': title }, h('h2', {}, title),
        h('ul', { class: 'plain' }, (items || []).map((item) =>
          h('li', {}, h('span', {}, item.name), ' ', h('span', { class: 'muted' }, detail(item)), ' ',
            h('a', { href: exportUrl(item.id), download: '' }, t('export'))))))
    mount(lists,
      section(t('presets'), p && p.presets, (x) => `${x.enabledPromptCount ?? ''}/${x.promptCount ?? ''} ${t('prompts')}`, presets.exportUrl),
      section(t('worldBooks'), w && w.worldBooks, (x) => `${x.entryCount ?? ''} ${t('entries')}`, worldBooks.exportUrl),
      section(t('personas'), u && u.users, (x) => x.descriptionPreview || '', users.exportUrl))
  }

  async function load() {
    const r = await attempt(() => characters.list())
    if (r) catalog = r
    sort.querySelector('select').value = catalog.sorting.mode
    drawGrid()
    drawMissing()
    drawLists()
  }

  const sort = labelledSelect(t('sortMode'),
    [['updated', t('sortUpdated')], ['name', t('sortName')], ['custom', t('sortCustom')]],
    catalog.sorting.mode,
    async (mode) => {
      const r = await attempt(() => characters.order(mode))
      if (r) {
        catalog.characters = r.characters
        catalog.sorting = r.sorting
        drawGrid()
      }
    })

  mount(main,
    h('h1', {}, t('library')),
    h('section', { class: 'import' },
      h('label', { for: 'import-files', class: 'button' }, t('import')), input, ' ',
      h('button', { type: 'button', onclick: () => go('#/edit/new') }, t('newCharacter')), ' ',
      h('button', { type: 'button', onclick: () => go('#/personas') }, t('personas')), ' ',
      h('button', { type: 'button', onclick: () => go('#/presets') }, t('preset')),
      h('p', { class: 'muted' }, t('importHint')), results),
    empty,
    h('div', { class: 'toolbar' },
      h('span', { class: 'field' }, h('label', { for: 'search' }, t('search')),
        h('input', { id: 'search', type: 'search', oninput: (ev) => { query = ev.target.value; shown = GRID_STEP; drawGrid() } })),
      sort, count),
    grid, more, missing, lists)
  more.textContent = '+'
  more.setAttribute('aria-label', `${t('characters')} +${GRID_STEP}`)

  // Grow the grid as its end scrolls into view.
  observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && !more.hidden) grow()
  })
  observer.observe(more)
  load().then(() => ready('library'))
  return () => observer.disconnect()
}
