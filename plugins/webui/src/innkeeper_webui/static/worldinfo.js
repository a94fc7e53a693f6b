// The world-info editor: the session's books (or a new one, bound to the chat), their entries
// listed, searched and sorted, every field of SillyTavern's entry editor, and "Test activation"
// (the engine's own decisions over pasted text). Entries are saved one at a time under the
// book's revision (docs/resources.md "World-book entries and test activation"): a 409 is shown
// and the edit stays in the form.

import { h, mount, announce } from './core.js'
import { extendText, t } from './i18n.js'
import { worldBooks } from './api.js'
import { showError } from './ui.js'

extendText({
  en: {
    worldInfo: 'World info', book: 'Book', newBook: 'New book', bookName: 'Book name', createBook: 'Create book',
    newEntry: 'New entry', saveEntry: 'Save entry', duplicateEntry: 'Duplicate entry', deleteEntry: 'Delete entry',
    searchEntries: 'Search entries', sortEntries: 'Sort entries', sortOrder: 'Order', sortTitle: 'Title', sortUid: 'UID',
    testActivation: 'Test activation', testText: 'Text to test', fires: 'fires', doesNotFire: 'does not fire',
    entries: 'Entries', noBooks: 'No world book is bound to this chat.', entryCount: '{n} entries',
    staleBook: 'The book changed elsewhere; your edit is kept — reload the book, then save again.',
    reloadBook: 'Reload book', untitled: '(untitled)', enabled: 'Enabled',
    keys: 'Keys', secondaryKeys: 'Secondary keys', secondaryLogic: 'Secondary logic', content: 'Content', comment: 'Title',
    constant: 'Constant', selective: 'Selective', position: 'Position', depth: 'Depth', role: 'Role', order: 'Order',
    probability: 'Probability', useProbability: 'Use probability', group: 'Group', groupWeight: 'Group weight',
    groupOverride: 'Prioritize in group', groupScoring: 'Group scoring', sticky: 'Sticky', cooldown: 'Cooldown', delay: 'Delay',
    scanDepth: 'Scan depth', caseSensitive: 'Case sensitive', wholeWords: 'Match whole words',
    excludeRecursion: 'Non-recursable', preventRecursion: 'Prevent further recursion', delayRecursion: 'Delay until recursion',
    ignoreBudget: 'Ignore budget', characterFilter: 'Character filter', filterExclude: 'Exclude these characters',
    filterTags: 'Filter tags', useDefault: 'Default', yes: 'Yes', no: 'No', automationId: 'Automation ID', outletName: 'Outlet name',
  },
  zh: {
    worldInfo: '世界书', book: '世界书', newBook: '新建世界书', bookName: '世界书名称', createBook: '创建',
    newEntry: '新建条目', saveEntry: '保存条目', duplicateEntry: '复制条目', deleteEntry: '删除条目',
    searchEntries: '搜索条目', sortEntries: '排序', testActivation: '测试激活', testText: '测试文本',
    fires: '激活', doesNotFire: '未激活', entries: '条目', noBooks: '此聊天未绑定世界书。',
    staleBook: '世界书已在别处修改；你的编辑已保留——重新载入后再保存。', reloadBook: '重新载入',
  },
})

const POSITIONS = [['0', '↑Char'], ['1', '↓Char'], ['2', '↑AN'], ['3', '↓AN'], ['4', '@D'], ['5', '↑EM'], ['6', '↓EM'], ['7', 'Outlet']]
const ROLES = [['0', 'system'], ['1', 'user'], ['2', 'assistant']]
const LOGIC = [['0', 'AND ANY'], ['1', 'NOT ALL'], ['2', 'NOT ANY'], ['3', 'AND ALL']]
const TRI = () => [['', t('useDefault')], ['true', t('yes')], ['false', t('no')]]

// [field, label key, kind]: kinds list (comma-separated), text, area, bool, notbool (shown
// inverted), int, float, optint (blank = none), tri (blank/true/false), and selects.
const FIELDS = [
  ['comment', 'comment', 'text'], ['keys', 'keys', 'list'], ['secondary_keys', 'secondaryKeys', 'list'],
  ['selective_logic', 'secondaryLogic', LOGIC], ['content', 'content', 'area'], ['disable', 'enabled', 'notbool'],
  ['constant', 'constant', 'bool'], ['selective', 'selective', 'bool'], ['position', 'position', POSITIONS],
  ['depth', 'depth', 'int'], ['role', 'role', ROLES], ['outlet_name', 'outletName', 'text'], ['order', 'order', 'int'],
  ['probability', 'probability', 'float'], ['use_probability', 'useProbability', 'bool'], ['group', 'group', 'text'],
  ['group_weight', 'groupWeight', 'float'], ['group_override', 'groupOverride', 'bool'], ['use_group_scoring', 'groupScoring', 'tri'],
  ['sticky', 'sticky', 'optint'], ['cooldown', 'cooldown', 'optint'], ['delay', 'delay', 'optint'],
  ['scan_depth', 'scanDepth', 'optint'], ['case_sensitive', 'caseSensitive', 'tri'], ['match_whole_words', 'wholeWords', 'tri'],
  ['exclude_recursion', 'excludeRecursion', 'bool'], ['prevent_recursion', 'preventRecursion', 'bool'],
  ['delay_until_recursion', 'delayRecursion', 'int'], ['ignore_budget', 'ignoreBudget', 'bool'], ['automation_id', 'automationId', 'text'],
]

const splitList = (text) => text.split(',').map((s) => s.trim()).filter(Boolean)

/** A form for one entry; `read()` gives the entry back or throws with a message naming the field. */
function entryForm(entry) {
  const controls = {}
  const rows = FIELDS.map(([name, label, kind]) => {
    const value = entry[name]
    let input
    if (Array.isArray(kind) || kind === 'tri') {
      const options = kind === 'tri' ? TRI() : kind
      input = h('select', { 'aria-label': t(label) }, options.map(([v, text]) => h('option', { value: v }, text)))
      input.value = kind === 'tri' ? (value === null || value === undefined ? '' : String(value)) : String(value)
    } else if (kind === 'bool' || kind === 'notbool') {
      input = h('input', { type: 'checkbox', 'aria-label': t(label), checked: kind === 'bool' ? Boolean(value) : !value })
    } else if (kind === 'area') {
      input = h('textarea', { rows: 5, 'aria-label': t(label) })
      input.value = value || ''
    } else {
      input = h('input', { type: 'text', 'aria-label': t(label), inputmode: kind === 'text' || kind === 'list' ? null : 'decimal' })
      input.value = kind === 'list' ? (value || []).join(', ') : value === null || value === undefined ? '' : String(value)
    }
    controls[name] = [input, kind, label]
    return h('label', { class: 'field' }, h('span', {}, t(label)), input)
  })
  const filter = entry.character_filter || { is_exclude: false, names: [], tags: [] }
  const names = h('input', { type: 'text', 'aria-label': t('characterFilter'), value: filter.names.join(', ') })
  const tags = h('input', { type: 'text', 'aria-label': t('filterTags'), value: filter.tags.join(', ') })
  const exclude = h('input', { type: 'checkbox', 'aria-label': t('filterExclude'), checked: filter.is_exclude })
  rows.push(h('label', { class: 'field' }, h('span', {}, t('characterFilter')), names),
    h('label', { class: 'field' }, h('span', {}, t('filterTags')), tags),
    h('label', { class: 'field' }, h('span', {}, t('filterExclude')), exclude))

  function read() {
    const out = { ...entry }
    for (const [name, [input, kind, label]] of Object.entries(controls)) {
      const raw = input.type === 'checkbox' ? input.checked : input.value
      const bad = () => { throw new Error(`${t(label)}: ${raw}`) }
      if (kind === 'list') out[name] = splitList(raw)
      else if (kind === 'bool') out[name] = raw
      else if (kind === 'notbool') out[name] = !raw
      else if (kind === 'tri') out[name] = raw === '' ? null : raw === 'true'
      else if (Array.isArray(kind)) out[name] = Number(raw)
      else if (kind === 'int' || kind === 'optint' || kind === 'float') {
        if (kind === 'optint' && raw.trim() === '') { out[name] = null; continue }
        const n = Number(raw)
        if (raw.trim() === '' || !Number.isFinite(n) || (kind !== 'float' && !Number.isInteger(n))) bad()
        out[name] = n
      } else out[name] = raw
    }
    const f = { is_exclude: exclude.checked, names: splitList(names.value), tags: splitList(tags.value) }
    out.character_filter = f.names.length || f.tags.length ? f : null
    delete out.uid
    return out
  }
  return { el: h('div', { class: 'entry-form' }, rows), read }
}

/** The panel, a region named "World info"; `sessionId()` names the session shown. */
export function worldInfoPanel(sessionId) {
  const el = h('section', { id: 'worldinfo-panel', class: 'panel', 'aria-label': t('worldInfo'), tabindex: '-1', hidden: true })
  let books = [] // summaries bound to the session
  let bookId = null
  let doc = null // {updatedAt, book}
  let query = ''
  let sort = 'order'
  let selected = null // uid being edited, or 'new'
  let form = null
  let draft = null // the entry as last typed, kept across a failed save
  const list = h('ul', { class: 'entries', 'aria-label': t('entries') })
  const editorBox = h('div', { class: 'entry-editor' })
  const message = h('p', { class: 'muted', role: 'status' })
  const testBox = h('textarea', { rows: 3, 'aria-label': t('testText') })
  const testOut = h('div', { class: 'test-results', 'aria-live': 'polite' })

  async function refresh() {
    const sid = sessionId()
    if (!sid) return
    try {
      const chosen = await worldBooks.selection(sid)
      books = (chosen.worldBooks || []).filter((b) => !b.missing)
      if (!books.some((b) => b.id === bookId)) bookId = books.length ? books[0].id : null
      if (bookId) await loadBook()
      else doc = null
    } catch (err) {
      showError(err)
    }
    draw()
  }

  async function loadBook() {
    const answer = await worldBooks.get(bookId)
    doc = { updatedAt: answer.worldBook.updatedAt, book: answer.worldBook.book, name: answer.worldBook.name }
  }

  async function createBook(name) {
    const sid = sessionId()
    try {
      const made = await worldBooks.create(name)
      const chosen = await worldBooks.selection(sid)
      const ids = [...((chosen.selection && chosen.selection.worldBookIds) || []), made.worldBook.id]
      await worldBooks.select(sid, ids)
      bookId = made.worldBook.id
      await refresh()
    } catch (err) {
      showError(err)
    }
  }

  function shownEntries() {
    const entries = doc ? [...doc.book.entries] : []
    const q = query.trim().toLowerCase()
    const hit = (e) => !q || [e.comment, e.content, ...(e.keys || []), ...(e.secondary_keys || [])].some((s) => (s || '').toLowerCase().includes(q))
    const out = entries.filter(hit)
    const by = { order: (a, b) => a.order - b.order, title: (a, b) => (a.comment || '').localeCompare(b.comment || ''), uid: (a, b) => String(a.uid).localeCompare(String(b.uid), undefined, { numeric: true }) }
    return out.sort(by[sort])
  }

  function nextUid() {
    const ints = doc.book.entries.map((e) => e.uid).filter((u) => Number.isInteger(u))
    return ints.length ? Math.max(...ints) + 1 : 0
  }

  async function save(uid) {
    let entry
    try {
      entry = form.read()
    } catch (err) {
      message.textContent = err.message // bad input: said, nothing sent, the form kept
      return
    }
    draft = entry
    try {
      const answer = await worldBooks.putEntry(bookId, uid, entry, doc.updatedAt)
      await loadBook()
      doc.updatedAt = answer.revision
      selected = uid
      draft = null
      message.textContent = t('saved')
      announce(t('saved'))
    } catch (err) {
      if (err.status === 409) {
        message.textContent = t('staleBook')
        return // the form stays as typed
      }
      message.textContent = `${err.message} (${err.code})`
      return
    }
    draw()
  }

  async function remove(uid) {
    try {
      await worldBooks.deleteEntry(bookId, uid, doc.updatedAt)
      await loadBook()
      selected = null
      draw()
    } catch (err) {
      message.textContent = err.status === 409 ? t('staleBook') : `${err.message} (${err.code})`
    }
  }

  async function runTest() {
    try {
      const answer = await worldBooks.testActivation(bookId, testBox.value)
      const names = new Map(doc.book.entries.map((e) => [String(e.uid), e.comment || t('untitled')]))
      mount(testOut, h('ul', { 'aria-label': t('testActivation') }, answer.decisions.map((d) =>
        h('li', { class: d.decision === 'included' ? 'fired' : 'rejected' },
          `${names.get(d.entryId) || d.entryId}: ${d.decision === 'included' ? t('fires') : t('doesNotFire')} — ${d.reason}`,
          d.primaryMatches.length ? ` (${d.primaryMatches.join(', ')})` : ''))))
    } catch (err) {
      showError(err)
    }
  }

  function drawEditor() {
    if (selected === null || !doc) return mount(editorBox)
    const isNew = selected === 'new'
    const uid = isNew ? nextUid() : selected
    const base = draft || (isNew ? { keys: [], content: '', comment: '', order: 100, position: 0, depth: 4, role: 0,
      probability: 100, use_probability: true, selective: true, selective_logic: 0, group_weight: 100,
      delay_until_recursion: 0 } : doc.book.entries.find((e) => String(e.uid) === String(selected)))
    if (!base) return mount(editorBox)
    form = entryForm(base)
    const act = (label, fn) => h('button', { type: 'button', onclick: fn }, label)
    mount(editorBox, form.el, h('div', { class: 'actions' },
      act(t('saveEntry'), () => save(uid)),
      isNew ? null : act(t('duplicateEntry'), () => { draft = { ...form.read() }; selected = 'new'; draw() }),
      isNew ? null : act(t('deleteEntry'), () => remove(uid)),
      act(t('reloadBook'), async () => { await loadBook(); draw() })))
  }

  function draw() {
    const act = (label, fn, extra = {}) => h('button', { type: 'button', ...extra, onclick: fn }, label)
    const nameBox = h('input', { type: 'text', 'aria-label': t('bookName') })
    const picker = books.length > 1 ? h('select', { 'aria-label': t('book'), onchange: async (ev) => { bookId = ev.target.value; selected = null; await loadBook(); draw() } },
      books.map((b) => h('option', { value: b.id, selected: b.id === bookId }, b.name))) : null
    const search = h('input', { type: 'search', 'aria-label': t('searchEntries'), value: query,
      oninput: (ev) => { query = ev.target.value; drawList() } })
    const sorter = h('select', { 'aria-label': t('sortEntries'), onchange: (ev) => { sort = ev.target.value; drawList() } },
      [['order', t('sortOrder')], ['title', t('sortTitle')], ['uid', t('sortUid')]].map(([v, l]) => h('option', { value: v, selected: v === sort }, l)))
    mount(el, h('h2', {}, t('worldInfo')),
      doc ? h('p', {}, doc.name, ' · ', t('entryCount', { n: doc.book.entries.length })) : h('p', { class: 'muted' }, t('noBooks')),
      picker,
      h('div', { class: 'row' }, nameBox, act(t('createBook'), () => nameBox.value.trim() && createBook(nameBox.value.trim()))),
      doc ? [h('div', { class: 'row' }, search, sorter, act(t('newEntry'), () => { selected = 'new'; draft = null; draw() })),
        list, editorBox, message,
        h('div', { class: 'test' }, testBox, act(t('testActivation'), () => runTest())), testOut] : null)
    drawList()
    drawEditor()
  }

  // Only the list redraws on a keystroke: a 10,000-entry book draws its first 200 matches.
  const LIST_LIMIT = 200
  function drawList() {
    if (!doc) return mount(list)
    const shown = shownEntries()
    mount(list, shown.slice(0, LIST_LIMIT).map((e) => h('li', {},
      h('button', { type: 'button', class: 'link', 'aria-pressed': String(String(e.uid) === String(selected)),
        onclick: () => { selected = e.uid; draft = null; drawEditor() } },
      `${e.comment || t('untitled')} — ${(e.keys || []).join(', ')}`, e.disable ? ' (off)' : ''))),
    shown.length > LIST_LIMIT ? h('li', { class: 'muted' }, `+${shown.length - LIST_LIMIT}`) : null)
    list.dataset.count = String(shown.length)
  }

  return { el, refresh }
}
