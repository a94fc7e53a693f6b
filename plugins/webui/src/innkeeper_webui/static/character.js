// A character's page: its playthroughs ("Playthrough N"), rename, the archive box, a new
// playthrough; the first time, the folder the play workspace lives in.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { characters } from './api.js'
import * as play from './play.js'
import { attempt, avatar, go, ready } from './ui.js'

/** A run's display name: an explicit rename verbatim, else "Playthrough N" / "N周目". */
export function title(row) {
  return (row && row.title) || t('playthroughN', { n: row ? play.numberOf(row) : '' })
}

/** Ask for the play folder (an existing absolute directory) until one is bound. */
function workspaceForm(onBound) {
  const input = h('input', { id: 'workspace-path', type: 'text', size: 60, placeholder: '/home/me/innkeeper-play' })
  const bind = async () => {
    const bound = await attempt(() => play.bindWorkspace(input.value.trim()))
    if (!bound) return
    if (bound.warnings && bound.warnings.length) announce(bound.warnings.join(', '))
    onBound()
  }
  input.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') bind() })
  return h('section', { class: 'import', 'aria-label': t('playFolder') },
    h('h2', {}, t('playFolder')), h('p', { class: 'muted' }, t('playFolderHint')),
    h('label', { for: 'workspace-path' }, t('playFolder')), ' ', input, ' ',
    h('button', { type: 'button', onclick: bind }, t('useFolder')))
}

export function characterView(main, characterId) {
  let character = null
  let bound = false
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
          h('p', { class: 'muted' }, (character.data.creatorNotes || '').slice(0, 400)))),
      h('h2', {}, t('playthroughs')),
      bound ? [
        h('ul', { class: 'plain', 'aria-label': t('playthroughs') }, active.map(item)),
        h('button', { type: 'button', onclick: async () => {
          const id = await attempt(() => play.create(character))
          if (id) go(`#/play/${encodeURIComponent(id)}`)
        } }, t('newPlaythrough')),
        active.length ? h('button', { type: 'button', onclick: async () => {
          const n = await attempt(() => play.archiveBroken(characterId))
          if (n !== undefined) announce(t('archivedCount', { n }))
        } }, t('archiveBroken')) : null,
        archived.length ? h('details', { class: 'archive' }, h('summary', {}, `${t('archived')} (${archived.length})`),
          h('ul', { class: 'plain', 'aria-label': t('archived') }, archived.map(item))) : null,
      ] : workspaceForm(() => start()))
    ready('character')
  }

  async function start() {
    const ws = await play.loadWorkspace()
    bound = Boolean(ws.selected)
    if (bound) await play.loadCatalog()
    draw()
  }

  mount(main, h('p', {}, h('a', { href: '#/library' }, `← ${t('library')}`)), body)
  attempt(async () => {
    character = (await characters.get(characterId)).character
    await start()
  })
  return play.onChange(draw)
}
