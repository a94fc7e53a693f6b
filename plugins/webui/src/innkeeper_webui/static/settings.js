// Settings: UI language, text and button size, the global default preset.
// The server has no /v1/ui-settings route yet, so these are kept in this browser (said on the
// page); the default preset is the server's (POST /v1/select without a session).

import { h, mount } from './core.js'
import { t, localSettings, saveLocalSettings } from './i18n.js'
import { presets } from './api.js'
import { attempt, labelledSelect, ready } from './ui.js'

export function settingsView(main, refreshShell) {
  const settings = localSettings()
  const change = (key, value) => {
    settings[key] = value
    saveLocalSettings(settings)
    refreshShell()
    settingsView(main, refreshShell)
    main.querySelector(`[data-key="${key}"] select`)?.focus()
  }
  const scale = (key, label) => {
    const field = labelledSelect(label, [['0.875', '87.5%'], ['1', '100%'], ['1.125', '112.5%'], ['1.25', '125%'], ['1.5', '150%']],
      String(settings[key] || 1), (v) => change(key, Number(v)))
    field.dataset.key = key
    return field
  }
  const language = labelledSelect(t('language'), [['auto', t('languageAuto')], ['en', 'English'], ['zh', '中文']],
    settings.language, (v) => change('language', v))
  language.dataset.key = 'language'
  const presetBox = h('div')
  mount(main, h('h1', {}, t('settings')), h('p', { class: 'muted' }, t('settingsLocal')),
    h('div', { class: 'form' }, language, scale('textScale', t('textScale')), scale('actionScale', t('actionScale')), presetBox))
  attempt(async () => {
    const p = await presets.list()
    mount(presetBox, labelledSelect(t('defaultPreset'), [['', t('none')], ...p.presets.map((x) => [x.id, x.name])], p.selectedId || '',
      (v) => attempt(() => presets.select(v || null))))
    ready('settings')
  })
}
