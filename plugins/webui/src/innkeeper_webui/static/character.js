// A character's page: its playthroughs ("Playthrough N"), rename, the archive box, and a new
// playthrough.

import { h, mount } from './core.js'
import { t } from './i18n.js'
import { characters } from './api.js'
import * as play from './play.js'
import { attempt, go } from './ui.js'

export function title(row) {
  return row.name || t('playthroughN', { n: row.number })
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
        if (name !== null) play.rename(row.id, name)
      } }, t('rename')), ' ',
      h('button', { type: 'button', class: 'small', onclick: () => play.setArchived(row.id, !archived) },
        archived ? t('restore') : t('archive')))
  }

  function draw() {
    if (!character) return
    const rows = play.playthroughs(characterId)
    const active = rows.filter((r) => !play.isArchived(r))
    const archived = rows.filter((r) => play.isArchived(r))
    mount(body,
      h('div', { class: 'character-head' },
        h('img', { src: characters.avatarUrl(character.id), alt: '', width: 120, height: 180 }),
        h('div', {}, h('h1', {}, character.name),
          h('p', { class: 'muted' }, (character.data.creatorNotes || '').slice(0, 400)))),
      h('h2', {}, t('playthroughs')),
      h('ul', { class: 'plain', 'aria-label': t('playthroughs') }, active.map(item)),
      h('button', { type: 'button', onclick: async () => {
        const id = await attempt(() => play.create(character))
        if (id) go(`#/play/${encodeURIComponent(id)}`)
      } }, t('newPlaythrough')),
      archived.length ? h('details', { class: 'archive' }, h('summary', {}, `${t('archived')} (${archived.length})`),
        h('ul', { class: 'plain', 'aria-label': t('archived') }, archived.map(item))) : null)
  }

  mount(main, h('p', {}, h('a', { href: '#/library' }, `← ${t('library')}`)), body)
  attempt(async () => {
    character = (await characters.get(characterId)).character
    draw()
    document.body.setAttribute('data-ready', 'character')
  })
  return play.onChange(draw)
}
