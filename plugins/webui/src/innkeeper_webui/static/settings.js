// Settings: the model connection (model.js), UI language, text and button size, the global
// default preset, and the play folder (folder.js). The language is the server's ui-settings (the
// browser's language while they are the defaults), the sizes its conversation-settings; the
// default preset is the server's (POST /v1/select without a session).

import { h, mount } from './core.js'
import { t, localSettings, saveLocalSettings, fromServer } from './i18n.js'
import { presets, uiSettings } from './api.js'
import { attempt, labelledSelect, ready, setTheme, themeChoice } from './ui.js'
import { modelSection } from './model.js'
import { folderSection } from './folder.js'

/** Read both settings documents from the server and keep a copy in this browser. */
export async function loadServerSettings() {
  const settings = fromServer(await uiSettings.get(), await uiSettings.conversation())
  saveLocalSettings(settings)
  return settings
}

async function saveSetting(key, value) {
  if (key === 'language') {
    // "Browser language" is the defaults; a chosen one keeps the other ui-settings fields.
    if (value === 'auto') await uiSettings.reset()
    else {
      const current = (await uiSettings.get()).settings
      await uiSettings.save({ locale: value === 'zh' ? 'zh-CN' : 'en', scale: current.scale, rpFollowCharacter: current.rpFollowCharacter })
    }
  } else {
    // A full replace: keep the fields this page does not edit (bubble style, scripts, …).
    const current = (await uiSettings.conversation()).settings
    await uiSettings.saveConversation({ ...current, [key]: value })
  }
  return loadServerSettings()
}

export function settingsView(main, refreshShell, focus = null) {
  const settings = localSettings()
  const change = (key, value) => attempt(async () => {
    await saveSetting(key, value)
    refreshShell()
    settingsView(main, refreshShell)
    main.querySelector(`[data-key="${key}"] select`)?.focus()
  })
  const scale = (key, label) => {
    const field = labelledSelect(label, [['0.9', '90%'], ['1', '100%'], ['1.1', '110%'], ['1.25', '125%'], ['1.5', '150%']],
      String(settings[key] || 1), (v) => change(key, Number(v)))
    field.dataset.key = key
    return field
  }
  const language = labelledSelect(t('language'), [['auto', t('languageAuto')], ['en', 'English'], ['zh', '中文']],
    settings.language, (v) => change('language', v))
  language.dataset.key = 'language'
  // The theme is this browser's own choice (no server setting): it applies at once.
  const theme = labelledSelect(t('theme'), [['system', t('themeSystem')], ['light', t('themeLight')], ['dark', t('themeDark')]],
    themeChoice(), (v) => setTheme(v))
  theme.dataset.key = 'theme'
  const presetBox = h('div')
  const model = modelSection()
  mount(main, h('h1', {}, t('settings')), model, h('p', { class: 'muted' }, t('settingsLocal')),
    h('div', { class: 'form' }, language, theme, scale('textScale', t('textScale')), scale('actionScale', t('actionScale')), presetBox),
    folderSection())
  // "Open Model settings" (a failed reply, the practice notice) lands on #/settings/model.
  if (focus === 'model') setTimeout(() => model.scrollIntoView(), 0)
  attempt(async () => {
    const p = await presets.list()
    mount(presetBox, labelledSelect(t('defaultPreset'), [['', t('none')], ...p.presets.map((x) => [x.id, x.name])], p.selectedId || '',
      (v) => attempt(() => presets.select(v || null))))
    ready('settings')
  })
}
