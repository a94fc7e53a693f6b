// The client's shell: language, settings, and navigation between the library, a character's
// playthroughs, a playthrough and the settings.

import { h, mount, effect } from './core.js'
import { chooseLanguage, localSettings, t } from './i18n.js'
import { applyScale, applyTheme, clearError, route, showError } from './ui.js'
import { libraryView } from './library.js'
import { characterView } from './character.js'
import { chatView } from './chat.js'
import { editorView } from './editor.js'
import { personasView } from './personas.js'
import { presetsView } from './presets.js'
import { loadServerSettings, settingsView } from './settings.js'
import { orb } from './orb.js'
import { groupsView } from './groups.js'
import { groupPlayView } from './groupplay.js'

let dispose = null
let relabelOrb = null

export function refreshShell() {
  const settings = localSettings()
  chooseLanguage(settings.language)
  applyScale(settings)
  applyTheme()
  document.querySelector('.brand').textContent = t('appName')
  mount(
    document.getElementById('nav'),
    h('a', { href: '#/library' }, t('library')),
    h('a', { href: '#/groups' }, t('groups')),
    h('a', { href: '#/settings' }, t('settings')),
  )
  if (relabelOrb) relabelOrb()
}

function start() {
  refreshShell()
  // The server's settings win over this browser's copy (read once at start); a server without
  // the Tavern settings routes leaves the copy in use. Redrawn only on a change, so focus stays.
  const cached = JSON.stringify(localSettings())
  loadServerSettings().then((fresh) => {
    if (JSON.stringify(fresh) !== cached) refreshShell()
  }, () => {})
  relabelOrb = orb(document.getElementById('orb'))
  const main = document.getElementById('main')
  window.addEventListener('unhandledrejection', (ev) => {
    ev.preventDefault()
    showError(ev.reason)
  })
  effect(() => {
    const hash = route()
    if (dispose) dispose()
    dispose = null
    clearError()
    const [, view, id] = hash.match(/^#\/([a-z]+)(?:\/(.+))?$/) || []
    let result
    if (view === 'character' && id) result = characterView(main, decodeURIComponent(id))
    else if (view === 'play' && id) result = chatView(main, decodeURIComponent(id))
    else if (view === 'edit' && id) result = editorView(main, id === 'new' ? null : decodeURIComponent(id))
    else if (view === 'personas') result = personasView(main)
    else if (view === 'presets') result = presetsView(main)
    else if (view === 'groups') result = groupsView(main)
    else if (view === 'groupplay' && id) result = groupPlayView(main, decodeURIComponent(id))
    else if (view === 'settings') result = settingsView(main, refreshShell, id || null)
    else result = libraryView(main)
    dispose = typeof result === 'function' ? result : null
  })
}

start()
