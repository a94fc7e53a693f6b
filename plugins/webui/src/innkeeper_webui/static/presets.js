// The preset editor (#/presets), SillyTavern's "AI Response Configuration" panel: a preset's
// samplers as sliders with number boxes, its prompt order (toggle, drag or Alt+arrow to reorder,
// edit a prompt's text, role and position/depth), Save preset under the preset's revision (a 409
// keeps the edit), Save as new preset, Use this preset, and what the provider will actually get
// for each sampler (docs/resources.md "Preset editing"; docs/webui.md "The preset editor").

import { h, mount, announce } from './core.js'
import { extendText, t } from './i18n.js'
import { presets } from './api.js'
import { attempt, ready } from './ui.js'

extendText({
  en: {
    presetEditor: 'Preset', presetToEdit: 'Chat Completion preset', noPresets: 'No preset yet: import a SillyTavern preset in the library first.',
    usePreset: 'Use this preset', inUse: 'In use by new chats', savePreset: 'Save preset', reloadPreset: 'Reload preset',
    saveAsNew: 'Save as new preset', newPresetName: 'New preset name', exportPreset: 'Export preset',
    samplers: 'Samplers', whatIsSent: 'What is sent', promptOrder: 'Prompt order', promptEditor: 'Prompt editor',
    s_temperature: 'Temperature', s_topP: 'Top P', s_topK: 'Top K', s_minP: 'Min P', s_topA: 'Top A',
    s_frequencyPenalty: 'Frequency penalty', s_presencePenalty: 'Presence penalty', s_repetitionPenalty: 'Repetition penalty',
    s_maxTokens: 'Max tokens', s_maxContext: 'Context size', s_seed: 'Seed', s_reasoningEffort: 'Reasoning effort',
    s_stop: 'Stop strings', s_verbosity: 'Verbosity',
    slider: '{name} slider', notSet: 'not set', effortAuto: 'Auto (not sent)',
    col_sampler: 'Sampler', col_stored: 'In the preset', col_sent: 'Sent', col_why: 'Why',
    st_unset: 'not set', st_sent: 'sent', st_mapped: 'sent as', st_dropped: 'dropped', 'st_not-sent': 'not sent',
    providerLine: 'Provider: {provider}', noProvider: 'no provider',
    enablePrompt: 'Enable {name}', promptMoveUp: 'Move up: {name}', promptMoveDown: 'Move down: {name}', editPrompt: 'Edit {name}',
    deletePrompt: 'Delete prompt', newPrompt: 'New prompt', marker: 'marker',
    reorderHint: 'Drag a prompt, or focus it and press Alt+↑ / Alt+↓, to move it.',
    promptName: 'Name', promptRole: 'Role', promptPosition: 'Position', promptDepth: 'Depth', promptOrderField: 'Order', promptText: 'Prompt',
    relative: 'Relative (where it is in the order)', inChat: 'In the chat, at a depth',
    markerNote: 'A marker: what it holds comes from the card, the lore or the chat.',
    unsaved: 'Unsaved changes', presetSaved: 'Preset saved.', presetCreated: 'Saved as "{name}".',
    presetConflict: 'The preset changed elsewhere; your edit is kept. Save preset again to replace that change, or Reload preset to drop yours.',
    notANumber: 'not a number', done: 'Done', needName: 'Give the new preset a name.',
  },
  zh: {
    presetEditor: '预设', presetToEdit: '对话补全预设', savePreset: '保存预设', saveAsNew: '另存为新预设', newPresetName: '新预设名称',
    usePreset: '使用此预设', samplers: '采样参数', whatIsSent: '实际发送', promptOrder: '提示词顺序', promptEditor: '提示词编辑',
    s_temperature: '温度', s_maxTokens: '最大回复长度', s_maxContext: '上下文长度', reloadPreset: '重新载入预设',
  },
})

/** Samplers in SillyTavern's panel order: wire name, step, whether it has a slider. */
const SAMPLERS = [
  ['temperature', 0.01, true], ['frequencyPenalty', 0.01, true], ['presencePenalty', 0.01, true],
  ['topP', 0.01, true], ['topK', 1, true], ['topA', 0.01, true], ['minP', 0.001, true],
  ['repetitionPenalty', 0.01, true], ['maxTokens', 1, false], ['maxContext', 1, false], ['seed', 1, false],
]
/** SillyTavern's reasoning-effort choices; `null` is its "auto" (not sent). */
const EFFORTS = [null, 'min', 'low', 'medium', 'high', 'max']
/** Slider ends until the server's admission answer says them (docs/resources.md "Preset editing"). */
const FALLBACK_RANGES = {
  temperature: [0, 2], frequencyPenalty: [-2, 2], presencePenalty: [-2, 2], topP: [0, 1], topK: [0, 500],
  topA: [0, 1], minP: [0, 1], repetitionPenalty: [1, 2],
}
const ADMISSION_DELAY_MS = 250

let uid = 0
const newId = () => `ps-${++uid}`

function labelled(label, control) {
  control.id = control.id || newId()
  return h('div', { class: 'edit-field' }, h('label', { for: control.id }, label), control)
}

/** Move `list[from]` to index `to` (a new array). */
export function moved(list, from, to) {
  if (to < 0 || to >= list.length || from === to) return list
  const out = list.slice()
  const [item] = out.splice(from, 1)
  out.splice(to, 0, item)
  return out
}

export function presetsView(main) {
  let list = []
  let selectedId = null // the preset new chats use (the global default)
  let preset = null // the stored preset being edited
  let sampling = {} // its samplers as shown (stored values overlaid with edits)
  let edits = {} // changed samplers only: a PUT sends just these, so untouched ones stay as stored
  let prompts = [] // the prompt order as shown
  let promptsChanged = false
  let revision = null
  let saving = false
  let admissionTimer = null
  let admissionRows = {}
  const badNumbers = new Map() // sampler → what was typed, while a box holds no number

  const picker = h('div')
  const actions = h('div', { class: 'preset-actions' })
  const message = h('div', { role: 'status', class: 'preset-message', hidden: true })
  const samplerBox = h('section', { class: 'preset-samplers', 'aria-label': t('samplers') })
  const admissionBox = h('section', { class: 'preset-admission', 'aria-label': t('whatIsSent') })
  const promptBox = h('section', { class: 'preset-prompts', 'aria-label': t('promptOrder') })
  const promptEditor = h('section', { class: 'prompt-editor', 'aria-label': t('promptEditor'), hidden: true })

  function say(text, kind = 'failed') {
    message.className = `preset-message notice ${kind}`
    mount(message, text ? h('span', {}, text) : null)
    message.hidden = !text
  }

  function dirty() {
    return promptsChanged || Object.keys(edits).length > 0
  }

  function markDirty() {
    const mark = actions.querySelector('.unsaved')
    if (mark) mark.hidden = !dirty()
  }

  // ------------------------------------------------------------------ samplers

  function setSampler(name, value) {
    sampling[name] = value
    edits[name] = value
    markDirty()
    scheduleAdmission()
  }

  function range(name) {
    const row = admissionRows[name]
    if (row && row.range && row.range.min !== null && row.range.max !== null) return [row.range.min, row.range.max]
    return FALLBACK_RANGES[name] || null
  }

  function samplerField([name, step, withSlider]) {
    const label = t(`s_${name}`)
    const stored = sampling[name]
    const number = h('input', { type: 'number', step: String(step), value: stored ?? '', placeholder: t('notSet') })
    const ends = withSlider ? range(name) : null
    let slider = null
    if (ends) {
      number.min = String(ends[0])
      number.max = String(ends[1])
      slider = h('input', { type: 'range', min: String(ends[0]), max: String(ends[1]), step: String(step),
        value: String(stored ?? ends[0]), 'aria-label': t('slider', { name: label }),
        oninput: (ev) => {
          number.value = ev.target.value
          setSampler(name, Number(ev.target.value))
        } })
    }
    number.addEventListener('input', () => {
      // A number box gives '' both when emptied (unset) and when it holds no number: only the
      // first clears the sampler; the second is named and blocks saving.
      if (number.validity.badInput) return badNumbers.set(name, label)
      badNumbers.delete(name)
      const text = number.value.trim()
      if (text === '') return setSampler(name, null)
      const value = Number(text)
      if (!Number.isFinite(value)) return // the box only holds numbers; a half-typed "-" waits
      if (slider) slider.value = String(value)
      setSampler(name, value)
    })
    const field = labelled(label, number)
    field.classList.add('sampler')
    field.dataset.sampler = name
    if (slider) field.append(slider)
    return field
  }

  function effortField() {
    const stored = sampling.reasoningEffort ?? null
    const values = EFFORTS.includes(stored) ? EFFORTS : [...EFFORTS, stored] // a provider's own id stays choosable
    const select = h('select', { onchange: (ev) => setSampler('reasoningEffort', ev.target.value || null) },
      values.map((v) => h('option', { value: v ?? '', selected: v === stored }, v === null ? t('effortAuto') : v)))
    return labelled(t('s_reasoningEffort'), select)
  }

  function drawSamplers() {
    mount(samplerBox, h('h2', {}, t('samplers')), h('div', { class: 'sampler-grid' }, SAMPLERS.map(samplerField), effortField()))
  }

  // ------------------------------------------------------------------ what is sent

  function scheduleAdmission() {
    clearTimeout(admissionTimer)
    admissionTimer = setTimeout(refreshAdmission, ADMISSION_DELAY_MS)
  }

  async function refreshAdmission() {
    if (!preset) return
    const asked = JSON.stringify(edits)
    let answer
    try {
      answer = await presets.admission(preset.id, edits)
    } catch (err) {
      // A value out of range: the server's own words, where the player looks at what is sent.
      mount(admissionBox, h('h2', {}, t('whatIsSent')), h('p', { class: 'notice failed', role: 'alert' }, `${err.message} (${err.code})`))
      return
    }
    if (asked !== JSON.stringify(edits)) return // a newer edit has its own answer coming
    const first = Object.keys(admissionRows).length === 0
    admissionRows = Object.fromEntries(answer.admission.samplers.map((r) => [r.name, r]))
    drawAdmission(answer.admission)
    if (first) drawSamplers() // the server's ranges replace the fallback slider ends
  }

  function shown(value) {
    return value === null || value === undefined ? '—' : typeof value === 'string' ? value : JSON.stringify(value)
  }

  function drawAdmission(admission) {
    const rows = admission.samplers.filter((r) => r.status !== 'unset' || r.name in edits)
    mount(admissionBox, h('h2', {}, t('whatIsSent')),
      h('p', { class: 'muted' }, admission.provider ? t('providerLine', { provider: admission.provider }) : t('noProvider')),
      h('table', { 'aria-label': t('whatIsSent') },
        h('thead', {}, h('tr', {}, h('th', {}, t('col_sampler')), h('th', {}, t('col_stored')), h('th', {}, t('col_sent')), h('th', {}, t('col_why')))),
        h('tbody', {}, rows.map((r) => h('tr', { class: `admission-${r.status}`, dataset: { sampler: r.name } },
          h('th', { scope: 'row' }, t(`s_${r.name}`)), h('td', {}, shown(r.stored)),
          h('td', {}, `${t(`st_${r.status}`)}${r.status === 'sent' || r.status === 'mapped' ? ` ${shown(r.effective)}` : ''}`),
          h('td', {}, r.reason))))))
  }

  // ------------------------------------------------------------------ prompt order

  function changePrompts(next) {
    prompts = next
    promptsChanged = true
    markDirty()
  }

  function move(index, to, focusName) {
    changePrompts(moved(prompts, index, to))
    drawPrompts()
    promptBox.querySelector(`li[data-identifier="${CSS.escape(focusName)}"]`)?.focus()
    announce(`${prompts[to].name}: ${to + 1} / ${prompts.length}`)
  }

  function promptRow(p, index) {
    const name = p.name || p.identifier
    const toggle = h('input', { type: 'checkbox', checked: p.enabled, 'aria-label': t('enablePrompt', { name }),
      onchange: (ev) => {
        changePrompts(prompts.map((q) => (q.identifier === p.identifier ? { ...q, enabled: ev.target.checked } : q)))
        drawPrompts()
      } })
    const li = h('li', { class: `prompt-row${p.enabled ? '' : ' disabled'}`, tabindex: '0', draggable: 'true', 'aria-label': name,
      dataset: { identifier: p.identifier },
      onkeydown: (ev) => {
        if (ev.target !== li || !ev.altKey) return
        if (ev.key === 'ArrowUp') { ev.preventDefault(); move(index, index - 1, p.identifier) }
        if (ev.key === 'ArrowDown') { ev.preventDefault(); move(index, index + 1, p.identifier) }
      },
      ondragstart: (ev) => { ev.dataTransfer.setData('text/plain', String(index)); ev.dataTransfer.effectAllowed = 'move' },
      ondragover: (ev) => ev.preventDefault(),
      ondrop: (ev) => {
        ev.preventDefault()
        const from = Number(ev.dataTransfer.getData('text/plain'))
        if (Number.isInteger(from)) move(from, index, prompts[from].identifier)
      } },
    toggle, ' ',
    h('span', { class: 'prompt-name' }, name),
    p.marker ? h('span', { class: 'muted' }, ` · ${t('marker')}`) : null,
    p.injectionPosition === 1 ? h('span', { class: 'muted' }, ` · @${p.injectionDepth} ${p.role}`) : h('span', { class: 'muted' }, ` · ${p.role}`),
    h('span', { class: 'prompt-buttons' },
      h('button', { type: 'button', class: 'small', 'aria-label': t('promptMoveUp', { name }), disabled: index === 0, onclick: () => move(index, index - 1, p.identifier) }, '↑'),
      h('button', { type: 'button', class: 'small', 'aria-label': t('promptMoveDown', { name }), disabled: index === prompts.length - 1, onclick: () => move(index, index + 1, p.identifier) }, '↓'),
      h('button', { type: 'button', class: 'small', 'aria-label': t('editPrompt', { name }), onclick: () => openPrompt(p.identifier) }, t('edit'))))
    return li
  }

  function drawPrompts() {
    mount(promptBox, h('h2', {}, t('promptOrder')), h('p', { class: 'muted' }, t('reorderHint')),
      h('ol', { class: 'plain prompt-list', 'aria-label': t('promptOrder') }, prompts.map(promptRow)),
      h('button', { type: 'button', onclick: addPrompt }, t('newPrompt')))
  }

  function addPrompt() {
    const identifier = `prompt-${crypto.randomUUID()}`
    changePrompts([...prompts, { identifier, name: t('newPrompt'), role: 'system', content: '', enabled: true, marker: false,
      systemPrompt: false, injectionPosition: 0, injectionDepth: 4, injectionOrder: 100, injectionTrigger: [], forbidOverrides: false }])
    drawPrompts()
    openPrompt(identifier)
  }

  function updatePrompt(identifier, change) {
    changePrompts(prompts.map((q) => (q.identifier === identifier ? { ...q, ...change } : q)))
  }

  function openPrompt(identifier) {
    const p = prompts.find((q) => q.identifier === identifier)
    if (!p) return
    const depth = h('input', { type: 'number', min: '0', max: '9999', step: '1', value: p.injectionDepth })
    const order = h('input', { type: 'number', step: '1', value: p.injectionOrder })
    const depthFields = h('div', { class: 'prompt-depth', hidden: p.injectionPosition !== 1 },
      labelled(t('promptDepth'), depth), labelled(t('promptOrderField'), order))
    const numberOf = (box, key) => box.addEventListener('input', () => {
      const value = Number(box.value)
      if (box.value.trim() !== '' && Number.isInteger(value)) updatePrompt(identifier, { [key]: value })
    })
    numberOf(depth, 'injectionDepth')
    numberOf(order, 'injectionOrder')
    const name = h('input', { type: 'text', value: p.name, oninput: (ev) => updatePrompt(identifier, { name: ev.target.value }) })
    const role = h('select', { onchange: (ev) => updatePrompt(identifier, { role: ev.target.value }) },
      ['system', 'user', 'assistant'].map((r) => h('option', { value: r, selected: r === p.role }, r)))
    const position = h('select', { onchange: (ev) => {
      const value = Number(ev.target.value)
      depthFields.hidden = value !== 1
      updatePrompt(identifier, { injectionPosition: value })
    } }, [[0, t('relative')], [1, t('inChat')]].map(([v, label]) => h('option', { value: String(v), selected: v === p.injectionPosition }, label)))
    const text = h('textarea', { rows: '10', oninput: (ev) => updatePrompt(identifier, { content: ev.target.value }) })
    text.value = p.content
    const builtIn = p.marker || p.systemPrompt
    mount(promptEditor, h('h2', {}, `${t('promptEditor')}: ${p.name || p.identifier}`),
      labelled(t('promptName'), name), labelled(t('promptRole'), role), labelled(t('promptPosition'), position), depthFields,
      p.marker ? h('p', { class: 'muted' }, t('markerNote')) : labelled(t('promptText'), text),
      h('div', { class: 'preset-actions' },
        h('button', { type: 'button', onclick: () => { closePrompt(); drawPrompts() } }, t('done')),
        builtIn ? null : h('button', { type: 'button', onclick: () => {
          changePrompts(prompts.filter((q) => q.identifier !== identifier))
          closePrompt()
          drawPrompts()
        } }, t('deletePrompt'))))
    promptEditor.hidden = false
    name.focus()
  }

  function closePrompt() {
    promptEditor.hidden = true
  }

  // ------------------------------------------------------------------ load and save

  function show(doc) {
    preset = doc
    revision = doc.revision
    sampling = { ...doc.sampling }
    edits = {}
    badNumbers.clear()
    prompts = doc.prompts.map((p) => ({ ...p }))
    promptsChanged = false
    closePrompt()
    drawPicker()
    drawActions()
    drawSamplers()
    drawPrompts()
    refreshAdmission()
  }

  async function open(id) {
    const r = await attempt(() => presets.get(id))
    if (r) show(r.preset)
  }

  function drawPicker() {
    const select = h('select', { onchange: (ev) => open(ev.target.value) },
      list.map((p) => h('option', { value: p.id, selected: preset && p.id === preset.id }, p.name)))
    mount(picker, list.length ? labelled(t('presetToEdit'), select) : h('p', { class: 'muted' }, t('noPresets')))
  }

  function drawActions() {
    if (!preset) return mount(actions)
    const asName = h('input', { type: 'text', value: `${preset.name} (copy)` })
    mount(actions,
      preset.id === selectedId
        ? h('span', { class: 'muted' }, t('inUse'))
        : h('button', { type: 'button', onclick: usePreset }, t('usePreset')),
      h('button', { type: 'button', onclick: save }, t('savePreset')),
      h('button', { type: 'button', onclick: () => open(preset.id).then(() => say('')) }, t('reloadPreset')),
      h('a', { class: 'button', href: presets.exportUrl(preset.id), download: '' }, t('exportPreset')),
      h('span', { class: 'unsaved muted', hidden: !dirty() }, t('unsaved')),
      h('div', { class: 'save-as' }, labelled(t('newPresetName'), asName),
        h('button', { type: 'button', onclick: () => saveAsNew(asName.value.trim()) }, t('saveAsNew'))))
  }

  /** The edit as a PUT body: changed samplers only, the whole prompt list when it changed. */
  function editBody() {
    const body = {}
    if (Object.keys(edits).length) body.sampling = { ...edits }
    if (promptsChanged) body.prompts = prompts
    return body
  }

  async function usePreset() {
    const r = await attempt(() => presets.select(preset.id))
    if (r === undefined) return
    selectedId = preset.id
    announce(t('saved'))
    drawActions()
  }

  function numbersProblem() {
    if (!badNumbers.size) return null
    return `${[...badNumbers.values()].join(', ')}: ${t('notANumber')}`
  }

  async function save() {
    if (saving || !preset) return
    const wrong = numbersProblem()
    if (wrong) return say(wrong)
    saving = true
    try {
      const saved = (await presets.update(preset.id, editBody(), revision)).preset
      await reloadList()
      show(saved)
      say(t('presetSaved'), 'saved')
      announce(t('saved'))
    } catch (err) {
      if (err.code === 'RESOURCE_REVISION_CONFLICT') {
        // Keep the edit as it is; the next Save replaces the other change on purpose.
        const fresh = await presets.get(preset.id).catch(() => null)
        if (fresh) revision = fresh.preset.revision
        say(t('presetConflict'))
      } else {
        say(`${t('error')}: ${err.message} (${err.code || 'ERROR'})`)
      }
    } finally {
      saving = false
    }
  }

  async function saveAsNew(name) {
    if (saving || !preset) return
    if (!name) return say(t('needName'))
    const wrong = numbersProblem()
    if (wrong) return say(wrong)
    saving = true
    let copy = null
    try {
      // The copy starts as the original's SillyTavern document (every field kept), then takes
      // the edit; an edit the server refuses removes the copy again and the form keeps it.
      copy = (await presets.importText(await presets.exportText(preset.id), name)).preset
      const saved = Object.keys(editBody()).length ? (await presets.update(copy.id, editBody(), copy.revision)).preset : copy
      copy = null
      await reloadList()
      show(saved)
      say(t('presetCreated', { name: saved.name }), 'saved')
      announce(t('saved'))
    } catch (err) {
      if (copy) await presets.remove(copy.id).catch(() => null)
      say(`${t('error')}: ${err.message} (${err.code || 'ERROR'})`)
    } finally {
      saving = false
    }
  }

  async function reloadList() {
    const r = await presets.list()
    list = r.presets
    selectedId = r.selectedId
  }

  mount(main, h('h1', {}, t('presetEditor')),
    h('div', { class: 'preset-editor editor-form' }, picker, actions, message,
      h('div', { class: 'preset-columns' }, h('div', {}, samplerBox, admissionBox), h('div', {}, promptBox, promptEditor))))

  ;(async () => {
    await attempt(reloadList)
    drawPicker()
    const first = list.find((p) => p.id === selectedId) || list[0]
    if (first) await open(first.id)
    ready('presets')
  })()
  return () => clearTimeout(admissionTimer)
}
