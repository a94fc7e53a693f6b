// A character's page: its playthroughs ("Playthrough N"), rename, the archive box, a new
// playthrough, and the ones kept in a play folder used before.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { characters } from './api.js'
import * as play from './play.js'
import { attempt, avatar, go, ready } from './ui.js'
import { importChatControl } from './runmenu.js'

/** A run's display name: an explicit rename verbatim, else "Playthrough N" / "N周目". */
export function title(row) {
  return (row && row.title) || t('playthroughN', { n: row ? play.numberOf(row) : '' })
}

/**
 * Playthroughs of this character kept in a folder bound earlier: listed with where they are, and
 * a button that binds that folder again (they open from there; nothing was moved or lost).
 */
function elsewhere(items, onBound) {
  if (!items.length) return null
  const byRoot = new Map()
  for (const { row, rootPath } of items) {
    if (!byRoot.has(rootPath)) byRoot.set(rootPath, [])
    byRoot.get(rootPath).push(row)
  }
  return h('section', { class: 'elsewhere', 'aria-label': t('otherFolders') },
    h('h2', {}, t('otherFolders')),
    [...byRoot].map(([rootPath, rows]) => h('div', {},
      h('p', {}, t('keptIn', { path: rootPath })),
      h('ul', { class: 'plain', 'aria-label': t('keptIn', { path: rootPath }) },
        rows.map((row) => h('li', {}, row.title || t('playthroughN', { n: row.playthroughNumber || 1 })))),
      h('button', { type: 'button', onclick: async () => {
        if (await attempt(() => play.bindWorkspace(rootPath))) onBound()
      } }, t('useFolderAgain')))))
}

export function characterView(main, characterId) {
  let character = null
  const body = h('div')

  function item(row) {
    const archived = play.isArchived(row)
    return h('li', { 'aria-label': title(row) },
      h('a', { href: `#/play/${encodeURIComponent(row.id)}` }, title(row)), ' ',
      h('button', { type: 'button', class: 'small', onclick: () => {
        const name = window.prompt(t('rename'), title(row))
        if (name !== null) attempt(() => play.rename(row.id, name))
      } }, t('rename')), ' ',
      h('button', { type: 'button', class: 'small', onclick: () => attempt(() => play.setArchived(row.id, !archived)) },
        archived ? t('restore') : t('archive')))
  }

  function draw() {
    if (!character) return
    const rows = play.playthroughs(characterId)
    const active = rows.filter((r) => !play.isArchived(r))
    const archived = rows.filter((r) => play.isArchived(r))
    mount(body,
      h('div', { class: 'character-head' },
        h('img', { ...avatar(character.id), alt: '', width: 120, height: 180 }),
        h('div', {}, h('h1', {}, character.name),
          h('p', { class: 'muted' }, (character.data.creatorNotes || '').slice(0, 400)),
          h('button', { type: 'button', onclick: () => go(`#/edit/${encodeURIComponent(character.id)}`) }, t('editCharacter')))),
      h('h2', {}, t('playthroughs')),
      [
        h('ul', { class: 'plain', 'aria-label': t('playthroughs') }, active.map(item)),
        h('button', { type: 'button', onclick: async () => {
          const id = await attempt(() => play.create(character))
          if (id) go(`#/play/${encodeURIComponent(id)}`)
        } }, t('newPlaythrough')), ' ',
        importChatControl(() => character),
        active.length ? h('button', { type: 'button', onclick: async () => {
          const n = await attempt(() => play.archiveBroken(characterId))
          if (n !== undefined) announce(t('archivedCount', { n }))
        } }, t('archiveBroken')) : null,
        archived.length ? h('details', { class: 'archive' }, h('summary', {}, `${t('archived')} (${archived.length})`),
          h('ul', { class: 'plain', 'aria-label': t('archived') }, archived.map(item))) : null,
      ],
      elsewhere(play.previousOf(characterId), () => start()))
    ready('character')
  }

  // No folder to choose first: the server binds its default play folder on the first
  // playthrough (another one can be chosen in Settings).
  async function start() {
    await play.loadWorkspace(true)
    await Promise.all([play.loadCatalog(), play.loadPrevious(true)])
    draw()
  }

  mount(main, h('p', {}, h('a', { href: '#/library' }, `← ${t('library')}`)), body)
  attempt(async () => {
    character = (await characters.get(characterId)).character
    await start()
  })
  return play.onChange(draw)
}
