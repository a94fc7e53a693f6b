// A group playthrough: the group chat with each reply under its speaker's avatar and name, the
// message box, "Next speaker" (who answers the next message, or a reply now by the strategy's
// pick), "Let X speak" for each member, and Stop (ends a round or auto mode). The server picks
// and records every speaker (docs/groups.md "Group playthroughs"); this page only shows them
// and asks.

import { h, mount, announce } from './core.js'
import { extendText, t } from './i18n.js'
import { groupPlay, playSessions } from './api.js'
import { attempt, avatar, composer, labelledSelect, ready } from './ui.js'

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
    groupReplying: '正在回复…',
    speakerPicked: '{name} 将回复你的下一条消息',
  },
})

/** How often the page reads the chat while a round runs. */
const POLL_MS = 250

export function groupPlayView(main, sessionId) {
  const log = h('ol', { class: 'plain messages', 'aria-label': t('groupChat') })
  const status = h('p', { role: 'status', class: 'muted' })
  const controls = h('div', { class: 'group-controls' })
  let members = []
  let gone = false
  let polling = false

  function messageItem(m) {
    if (m.role === 'user') {
      return h('li', { class: 'message user', 'aria-label': t('you') },
        h('strong', {}, t('you')), h('p', {}, m.text))
    }
    const who = m.speaker || { name: '', characterId: null }
    return h('li', { class: 'message assistant', 'aria-label': who.name, 'data-speaker': who.characterId || '' },
      who.characterId ? h('img', { ...avatar(who.characterId), alt: '', width: 32, height: 48 }) : null, ' ',
      h('strong', {}, who.name), h('p', {}, m.text))
  }

  async function refresh() {
    const [read, state] = await Promise.all([playSessions.messages(sessionId), groupPlay.state(sessionId)])
    if (gone) return true
    const shown = read.messages.filter((m) => m.role === 'user' || (m.role === 'assistant' && m.origin.kind === 'assistant'))
    mount(log, shown.map(messageItem))
    const busy = read.incompleteTurn || state.queued.length > 0 || state.waiting
    status.textContent = busy ? t('groupReplying') : ''
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
    if (!gone) ready('groupplay')
  }

  const { box, button } = composer(`innkeeper.webui.group.${sessionId}`, async () => {
    const text = box.value
    if (!text.trim()) return
    const sent = await attempt(() => playSessions.send(sessionId, text))
    if (!sent) return
    box.value = ''
    sessionStorage.removeItem(`innkeeper.webui.group.${sessionId}`)
    follow()
  })

  function drawControls() {
    const choices = [['', t('byStrategy')], ...members.filter((m) => !m.missing).map((m) => [m.characterId, m.name])]
    mount(controls,
      labelledSelect(t('nextSpeaker'), choices, '', async (value) => {
        if (!value) return
        const done = await attempt(() => groupPlay.nextSpeaker(sessionId, value))
        if (done) announce(t('speakerPicked', { name: done.speaker.name }))
      }), ' ',
      h('button', { type: 'button', class: 'small', onclick: async () => {
        if (await attempt(() => groupPlay.reply(sessionId))) follow()
      } }, t('replyNow')), ' ',
      members.filter((m) => !m.missing).map((m) => h('button', { type: 'button', class: 'small', onclick: async () => {
        if (await attempt(() => groupPlay.reply(sessionId, m.characterId))) follow()
      } }, t('letSpeak', { name: m.name }))), ' ',
      h('button', { type: 'button', class: 'small', onclick: async () => {
        if (await attempt(() => groupPlay.stop(sessionId))) follow()
      } }, t('stopGroup')))
  }

  const title = h('h1', {})
  mount(main, title, log, status, controls, h('div', { class: 'composer' }, box, button))
  attempt(async () => {
    const state = await groupPlay.state(sessionId)
    members = state.members
    title.textContent = state.name
    drawControls()
    await follow()
  })
  return () => { gone = true }
}
