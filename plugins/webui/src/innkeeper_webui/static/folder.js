// Settings → Play folder: where playthroughs are kept, the folder in use (the server's default
// until another is chosen), choosing another one, and the folders used before with the
// playthroughs still kept there (binding one again opens them; moving never moves files).

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import * as play from './play.js'
import { attempt } from './ui.js'

const rowName = (row) => `${row.characterName || row.characterId || '?'} — ${row.title || t('playthroughN', { n: row.playthroughNumber || 1 })}`

/** The "Play folder" section; `redraw()` after a folder is bound. */
export function folderSection() {
  const section = h('section', { class: 'folder', 'aria-label': t('playFolder') })

  async function bind(path) {
    const bound = await attempt(() => play.bindWorkspace(path))
    if (!bound) return
    const words = (bound.warnings || []).map((w) => t(`warning_${w}`)).filter((w) => !w.startsWith('warning_'))
    announce([t('playFolderNow', { path: bound.rootPath }), ...words].join(' '))
    await draw()
  }

  async function draw() {
    const ws = await play.loadWorkspace(true)
    const previous = await play.loadPrevious(true)
    const input = h('input', { id: 'workspace-path', type: 'text', size: 60, placeholder: '/home/me/innkeeper-play' })
    const use = () => { if (input.value.trim()) bind(input.value.trim()) }
    input.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') use() })
    mount(section,
      h('h2', {}, t('playFolder')),
      h('p', { class: 'muted' }, t('playFolderExplain')),
      h('p', { class: 'current-folder' }, ws.selected
        ? t('playFolderCurrent', { path: ws.rootPath })
        : t('playFolderDefault', { path: ws.defaultRootPath || '' })),
      h('p', {}, h('label', { for: 'workspace-path' }, t('anotherFolder')), ' ', input, ' ',
        h('button', { type: 'button', onclick: use }, t('useFolder'))),
      h('p', { class: 'muted' }, t('anotherFolderHint')),
      previous.length ? h('div', { class: 'previous' },
        h('h3', {}, t('otherFolders')),
        previous.map((root) => h('div', {},
          h('p', {}, t('keptIn', { path: root.rootPath }),
            root.status === 'unavailable' ? h('span', { class: 'muted' }, ` (${t('folderUnavailable')}: ${root.reason || root.code})`) : null),
          root.playthroughs.length
            ? h('ul', { class: 'plain', 'aria-label': t('keptIn', { path: root.rootPath }) }, root.playthroughs.map((row) => h('li', {}, rowName(row))))
            : h('p', { class: 'muted' }, t('noPlaythroughsThere')),
          root.status !== 'unavailable' ? h('button', { type: 'button', onclick: () => bind(root.rootPath) }, t('useFolderAgain')) : null))) : null)
  }

  attempt(draw)
  return section
}
