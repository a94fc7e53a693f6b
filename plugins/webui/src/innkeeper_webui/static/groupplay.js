// A group playthrough: the group chat with each message under its speaker's avatar and name, the
// message box, "Next speaker" (who answers the next message, or a reply now by the strategy's
// pick), "Let X speak" for each member, Auto mode and Stop (ends a round or auto mode). The last
// reply has the chat's swipe arrows and Regenerate (the same member answers again); every reply
// has Branch (a new playthrough of the group, opened here) and Why. The server picks and records
// every speaker (docs/groups.md "Group playthroughs"); this page only shows them and asks.
// Swipes and branches are the chat's: the run's timeline.json, composed by play.js.

import { h, mount, announce } from './core.js'
import { extendText, t } from './i18n.js'
import { groupPlay, groups, playSessions } from './api.js'
import * as play from './play.js'
import { attempt, avatar, composer, labelledSelect, ready } from './ui.js'
import { branchButton, swipeButtons } from './chat-actions.js'
import { whyPanel } from './why.js'

extendText({
  en: {
    playGroup: 'Play {name}',
    groupChat: 'Group chat',
    you: 'You',
    nextSpeaker: 'Next speaker',
    byStrategy: 'Chosen by the strategy',
    replyNow: 'Next speaker now',
    letSpeak: 'Let {name} speak',
    stopGroup: 'Stop',
    autoMode: 'Auto mode',
    groupReplying: 'Replying…',
    speakerPicked: '{name} answers your next message',
  },
  zh: {
    playGroup: '开始 {name}',
    groupChat: '群聊',
    you: '你',
    nextSpeaker: '下一位发言者',
    byStrategy: '由策略选择',
    replyNow: '立即让下一位发言',
    letSpeak: '让 {name} 发言',
    stopGroup: '停止',
    autoMode: '自动模式',
    groupReplying: '正在回复…',
    speakerPicked: '{name} 将回复你的下一条消息',
  },
})

/** How often the page reads the chat while a round runs. */
const POLL_MS = 250

/** The catalog row of `id`: a playthrough id, or (an older link) its first session's id. */
const rowOf = (id) => play.playthrough(id) || play.groupRunStartedAt(id)

export function groupPlayView(main, id) {
  const log = h('ol', { class: 'plain messages', 'aria-label': t('groupChat') })
  const status = h('p', { role: 'status', class: 'muted' })
  const controls = h('div', { class: 'group-controls' })
  let row = null
  let head = null
  let state = null
  let shown = []
  let qas = []
  let busy = true
  let gone = false
  let polling = false
  const why = whyPanel(() => head)
  let whyShows = null // the chat (session and replies) the open Why panel was drawn for
  const route = (runId) => `#/groupplay/${encodeURIComponent(runId)}`

  function openWhy(seq) {
    why.el.hidden = false
    why.refresh(seq)
    why.el.focus()
  }

  function actions(m, k) {
    const last = k === qas.length - 1
    const node = play.path(play.timeline(row.id))[k]
    return h('div', { class: 'actions' },
      last && !busy ? swipeButtons(row.id, node, qas[k], () => follow()) : null,
      branchButton(row.id, k, qas[k], play.characterOf(row), { disabled: busy, route }),
      h('button', { type: 'button', class: 'small', onclick: () => openWhy(m.seq) }, t('why')))
  }

  function messageItem(m, qaIndex) {
    if (m.role === 'user') {
      return h('li', { class: 'message user', 'aria-label': t('you') },
        h('strong', {}, t('you')), h('p', {}, m.text))
    }
    const who = m.speaker || { name: '', characterId: null }
    const k = qaIndex.get(m.id)
    return h('li', { class: 'message assistant', 'aria-label': who.name, 'data-speaker': who.characterId || '' },
      who.characterId ? h('img', { ...avatar(who.characterId), alt: '', width: 32, height: 48 }) : null, ' ',
      h('strong', {}, who.name), h('p', {}, m.text), k === undefined ? null : actions(m, k))
  }

  function draw() {
    const qaIndex = new Map(qas.map((qa, k) => [qa.reply.id, k]))
    mount(log, shown.map((m) => messageItem(m, qaIndex)))
    status.textContent = busy ? t('groupReplying') : ''
  }

  async function refresh() {
    head = play.headSession(row.id)
    const sid = head
    const [read, now] = await Promise.all([playSessions.messages(sid), groupPlay.state(sid)])
    if (gone || sid !== play.headSession(row.id)) return false
    state = now
    shown = read.messages.filter((m) => m.role === 'user' || (m.role === 'assistant' && m.origin.kind === 'assistant'))
    qas = play.qaTurns(read.messages, true)
    busy = Boolean(read.incompleteTurn || now.queued.length > 0 || now.waiting)
    await play.reconcile(row.id, read.messages)
    draw()
    // An open Why panel follows a new reply or swipe (not every read of an unchanged chat).
    const shownNow = `${sid}|${qas.length}`
    if (!why.el.hidden && !busy && shownNow !== whyShows) why.refresh()
    if (!busy) whyShows = shownNow
    return !busy
  }

  async function follow() {
    if (polling) return
    polling = true
    try {
      // The turn asked for may not have started yet: read at least twice.
      for (let i = 0; !gone; i++) {
        const settled = await refresh()
        if (settled && i > 0) break
        await new Promise((resolve) => setTimeout(resolve, POLL_MS))
      }
    } finally {
      polling = false
    }
    if (!gone) {
      drawControls()
      ready('groupplay')
    }
  }

  const { box, button } = composer(`innkeeper.webui.group.${id}`, async () => {
    const text = box.value
    if (!text.trim()) return
    const sent = await attempt(() => playSessions.send(head, text))
    if (!sent) return
    box.value = ''
    sessionStorage.removeItem(`innkeeper.webui.group.${id}`)
    follow()
  })

  /** Auto mode is the group's own setting (docs/resources.md "Groups"): one PATCH of it. */
  async function setAutoMode(on) {
    const done = await attempt(async () => {
      const group = (await groups.list()).groups.find((g) => g.id === state.groupId)
      return groups.update(group.id, { revision: group.revision, autoMode: on })
    })
    if (done) follow()
  }

  function drawControls() {
    const members = state.members.filter((m) => !m.missing)
    const choices = [['', t('byStrategy')], ...members.map((m) => [m.characterId, m.name])]
    const auto = h('input', { type: 'checkbox', id: 'group-auto-mode', onchange: () => setAutoMode(auto.checked) })
    auto.checked = state.autoMode
    const ask = (fn) => async () => { if (await attempt(fn)) follow() }
    mount(controls,
      labelledSelect(t('nextSpeaker'), choices, '', async (value) => {
        if (!value) return
        const done = await attempt(() => groupPlay.nextSpeaker(head, value))
        if (done) announce(t('speakerPicked', { name: done.speaker.name }))
      }), ' ',
      h('button', { type: 'button', class: 'small', onclick: ask(() => groupPlay.reply(head)) }, t('replyNow')), ' ',
      members.map((m) => h('button', { type: 'button', class: 'small', onclick: ask(() => groupPlay.reply(head, m.characterId)) },
        t('letSpeak', { name: m.name }))), ' ',
      h('span', {}, auto, ' ', h('label', { for: 'group-auto-mode' }, t('autoMode'))), ' ',
      h('button', { type: 'button', class: 'small', onclick: ask(() => groupPlay.stop(head)) }, t('stopGroup')))
  }

  const title = h('h1', {})
  const off = play.onChange(() => { if (row && !polling) follow() })
  attempt(async () => {
    await play.loadCatalog()
    if (!rowOf(id)) { // started a moment ago: the server bound the play folder and wrote the row
      await play.loadWorkspace(true)
      await play.refreshCatalog()
    }
    row = rowOf(id)
    if (!row) {
      mount(main, h('p', {}, '404'), h('a', { href: '#/groups' }, t('groups')))
      return
    }
    await play.loadTimeline(row.id)
    mount(main, h('div', { class: 'play' },
      h('div', { class: 'chat' }, title, log, status, controls, h('div', { class: 'composer' }, box, button)), why.el))
    state = await groupPlay.state(play.headSession(row.id))
    title.textContent = state.name
    drawControls()
    await follow()
  })
  return () => {
    gone = true
    off()
  }
}
