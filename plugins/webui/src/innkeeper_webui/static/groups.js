// Groups: several library characters who share one chat (SillyTavern's group chats). This page
// creates a group from library cards, reorders and mutes its members and picks who answers
// (the reply strategy). Every change is one PATCH naming the revision shown; if someone else
// changed the group meanwhile, the server refuses it and the page shows the group as it is now.

import { h, mount, announce } from './core.js'
import { t } from './i18n.js'
import { characters, groupPlay, groups as api } from './api.js'
import { attempt, avatar, go, labelledSelect, ready } from './ui.js'

const STRATEGIES = ['natural', 'list', 'manual', 'pooled']

function members(group) {
  return group.members.map((m) => ({ characterId: m.characterId, muted: m.muted }))
}

export function groupsView(main) {
  const body = h('div')
  let library = []
  let list = []
  let gone = false

  async function load() {
    const [cards, stored] = await Promise.all([characters.list(), api.list()])
    library = cards.characters
    list = stored.groups
  }

  async function save(group, change) {
    const done = await attempt(async () => {
      try {
        await api.update(group.id, { revision: group.revision, ...change })
      } catch (err) {
        if (err.code === 'GROUP_REVISION_CONFLICT') await load()
        throw err
      }
      await load()
      return true
    })
    draw()
    return done
  }

  function move(group, index, step) {
    const next = members(group)
    const [item] = next.splice(index, 1)
    next.splice(index + step, 0, item)
    return save(group, { members: next })
  }

  function memberItem(group, member, index) {
    const name = member.name || t('missingCard')
    const last = group.members.length - 1
    return h('li', { 'aria-label': name, class: member.muted ? 'muted' : null },
      member.missing ? null : h('img', { ...avatar(member.characterId), alt: '', width: 32, height: 48 }), ' ',
      h('span', {}, name), member.muted ? h('span', { class: 'muted' }, ` (${t('muted')})`) : null, ' ',
      h('button', { type: 'button', class: 'small', disabled: index === 0,
        'aria-label': t('groupMoveUp', { name }), onclick: () => move(group, index, -1) }, '↑'),
      h('button', { type: 'button', class: 'small', disabled: index === last,
        'aria-label': t('groupMoveDown', { name }), onclick: () => move(group, index, 1) }, '↓'),
      h('button', { type: 'button', class: 'small', onclick: () => {
        const next = members(group)
        next[index].muted = !member.muted
        save(group, { members: next })
      } }, member.muted ? t('unmuteMember', { name }) : t('muteMember', { name })))
  }

  function groupItem(group) {
    return h('li', { class: 'group', 'aria-label': group.name },
      h('h2', {}, group.name),
      h('ol', { class: 'plain', 'aria-label': t('membersOf', { name: group.name }) },
        group.members.map((m, i) => memberItem(group, m, i))),
      labelledSelect(t('replyStrategy'), STRATEGIES.map((s) => [s, t(`strategy_${s}`)]),
        group.activationStrategy, (value) => save(group, { activationStrategy: value })),
      ' ',
      // A group playthrough: the server starts it and picks every speaker (groupplay.js).
      h('button', { type: 'button', class: 'primary', onclick: async () => {
        const made = await attempt(() => groupPlay.start(group.id))
        if (made) go(`#/groupplay/${encodeURIComponent(made.playthrough.id)}`)
      } }, t('playGroup', { name: group.name })),
      ' ',
      h('button', { type: 'button', class: 'small', onclick: async () => {
        if (!window.confirm(t('deleteGroupConfirm', { name: group.name }))) return
        await attempt(() => api.remove(group.id, group.revision))
        await attempt(load)
        draw()
      } }, t('deleteGroup')))
  }

  function createForm() {
    const name = h('input', { type: 'text', 'aria-label': t('groupName') })
    const boxes = library.map((card) => {
      const box = h('input', { type: 'checkbox', value: card.id, id: `member-${card.id}` })
      return { box, item: h('li', {}, box, ' ', h('label', { for: `member-${card.id}` }, card.name)) }
    })
    return h('section', { 'aria-label': t('newGroup') },
      h('h2', {}, t('newGroup')),
      h('p', {}, name),
      h('ul', { class: 'plain', 'aria-label': t('chooseMembers') }, boxes.map((b) => b.item)),
      h('button', { type: 'button', class: 'primary', onclick: async () => {
        const chosen = boxes.filter((b) => b.box.checked).map((b) => ({ characterId: b.box.value }))
        const made = await attempt(() => api.create({ name: name.value, members: chosen }))
        if (!made) return
        await attempt(load)
        draw()
        announce(t('groupCreated', { name: made.group.name }))
      } }, t('createGroup')))
  }

  function draw() {
    if (gone) return
    mount(body,
      h('h1', {}, t('groups')),
      h('ul', { class: 'plain groups', 'aria-label': t('groups') }, list.map(groupItem)),
      createForm())
    ready('groups')
  }

  mount(main, h('p', {}, h('a', { href: '#/library' }, `← ${t('library')}`)), body)
  attempt(async () => {
    await load()
    draw()
  })
  return () => { gone = true }
}
