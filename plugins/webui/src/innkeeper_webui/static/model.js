// Settings → Model: which model server writes the replies (docs/webui.md "Model settings").
// The host keeps the settings (GET/PUT /host/api/model-settings) and applies them from the next
// turn; the key is sent to the host only, never read back (the page sees "set (…abcd)"); "Test
// connection" asks the host to list the server's models (a page cannot call another origin) and
// fills the model picker, or shows the server's own reason. Fields given when the server was
// started (flags, environment, config file) are shown but cannot be changed here.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { modelSettings } from './api.js'
import { attempt, labelledSelect } from './ui.js'

const NAMES = { openai: 'OpenAI', deepseek: 'DeepSeek', openrouter: 'OpenRouter', vllm: 'vLLM', llamacpp: 'llama.cpp' }
const choiceName = (c) => (c === 'synthetic' ? t('practiceChoice') : NAMES[c] || c)

/** What serves now, in plain words. */
export function describe(view) {
  if (view.practice) return t('practiceChoice')
  return `${choiceName(view.provider)} · ${view.baseUrl} · ${view.model}`
}

const keyState = (key) => (key.set ? (key.last4 ? t('keySet', { last4: key.last4 }) : t('keySetShort')) : t('keyNotSet'))

function input(id, label, attrs = {}) {
  const el = h('input', { id, type: 'text', size: 48, autocomplete: 'off', spellcheck: 'false', ...attrs })
  return { el, row: h('p', { class: 'field' }, h('label', { for: id }, label), ' ', el) }
}

/** The "Model" section. */
export function modelSection() {
  const section = h('section', { id: 'model-settings', 'aria-label': t('modelSection'), tabindex: '-1' })
  let view = null
  let models = []

  async function draw() {
    view = await modelSettings.get()
    const fixed = new Set(view.overridden)
    let provider = view.provider
    const url = input('model-url', t('modelServerUrl'), { value: view.baseUrl || '', inputmode: 'url', disabled: fixed.has('baseUrl') })
    const key = input('model-key', t('apiKey'), {
      type: 'password', placeholder: view.apiKey.set ? t('keyKeep') : '', disabled: fixed.has('apiKey'), 'aria-describedby': 'model-key-state',
    })
    key.row.append(' ', h('span', { id: 'model-key-state', class: 'muted' }, keyState(view.apiKey)))
    const model = input('model-name', t('modelName'), { value: view.model || '', disabled: fixed.has('model') })
    const picker = h('span')
    const result = h('p', { class: 'model-result', role: 'status' })
    const failure = h('p', { class: 'error-text', role: 'alert', hidden: true })
    const providerField = labelledSelect(t('provider'), view.choices.map((c) => [c, choiceName(c)]), provider, (v) => {
      const before = view.defaultBaseUrls[provider]
      provider = v
      // A URL left at the previous profile's usual address follows the new profile.
      if (!url.el.value || url.el.value === before) url.el.value = view.defaultBaseUrls[v] || ''
      practiceOnly()
    })
    providerField.querySelector('select').disabled = fixed.has('provider')
    const testButton = h('button', { type: 'button', onclick: () => test() }, t('testConnection'))
    const saveButton = h('button', { type: 'button', class: 'primary', disabled: fixed.size === 4, onclick: () => save() }, t('save'))
    const removeKey = view.apiKey.set && !fixed.has('apiKey')
      ? h('button', { type: 'button', class: 'small', onclick: () => save({ apiKey: null }) }, t('removeKey')) : null

    function practiceOnly() {
      const practice = provider === 'synthetic'
      url.el.disabled = practice || fixed.has('baseUrl')
      model.el.disabled = practice || fixed.has('model')
      testButton.disabled = practice
    }

    function showModels() {
      if (!models.length) return mount(picker)
      mount(picker, labelledSelect(t('modelsFromServer'), [['', '—'], ...models.map((m) => [m, m])], models.includes(model.el.value) ? model.el.value : '',
        (v) => { if (v) model.el.value = v }))
    }

    function fail(err) {
      failure.textContent = err.message + (err.code ? ` (${err.code})` : '')
      failure.hidden = false
      result.textContent = ''
    }

    async function test() {
      failure.hidden = true
      result.textContent = '…'
      try {
        const body = { provider, baseUrl: url.el.value.trim() }
        if (key.el.value.trim()) body.apiKey = key.el.value.trim()
        const r = await modelSettings.test(body)
        models = r.models
        result.textContent = t('modelsFound', { n: models.length })
        if (!model.el.value && models.length) model.el.value = models[0]
        showModels()
      } catch (err) {
        fail(err)
      }
    }

    async function save(extra = {}) {
      failure.hidden = true
      const body = { provider }
      if (provider !== 'synthetic') {
        body.baseUrl = url.el.value.trim()
        body.model = model.el.value.trim()
      }
      if (key.el.value.trim()) body.apiKey = key.el.value.trim()
      try {
        await modelSettings.save({ ...body, ...extra })
      } catch (err) {
        return fail(err)
      }
      await draw()
      section.querySelector('.model-result').textContent = t('modelSaved')
      announce(t('modelSaved'))
    }

    mount(section,
      h('h2', {}, t('modelSection')),
      h('p', { class: 'muted' }, t('modelIntro')),
      h('p', { class: 'model-now' }, t('usingNow', { what: describe(view) })),
      fixed.size ? h('p', { class: 'notice' }, t('overriddenNote', { fields: [...fixed].map((f) => t({ provider: 'provider', baseUrl: 'modelServerUrl', apiKey: 'apiKey', model: 'modelName' }[f])).join(', ') })) : null,
      h('div', { class: 'form' }, providerField, url.row, key.row, removeKey, model.row, picker,
        h('p', {}, testButton, ' ', saveButton), result, failure))
    practiceOnly()
    showModels()
  }

  attempt(draw)
  return section
}
