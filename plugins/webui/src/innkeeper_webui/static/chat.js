// A playthrough: the greeting picker, the chat (sanitized Markdown, paged so 2,000 messages stay
// responsive), the streamed reply with Stop, swipes, regenerate, branch, continue from here,
// display-layer edit, copy and the stopped-request retry; the Why and session-setup panels.

import { h, mount, announce, newestOnly } from './core.js'
import { t } from './i18n.js'
import { characters, playSessions, selection, sessions } from './api.js'
import * as play from './play.js'
import { renderAll, setHtml } from './markdown.js'
import { UNPAGED, attempt, composer, go, practiceNotice, ready, showError } from './ui.js'
import * as drafts from './drafts.js'
import { openingView } from './opening.js'
import { fillMacros, focusPicker, greetingArticle as greetingOf, greetingsOf } from './greeting.js'
import { title } from './character.js'
import { whyPanel } from './why.js'
import { AI_OUTPUT, USER_INPUT, applyDisplay, displayScripts } from './regex.js'
import { setupPanel } from './setup.js'
import { playthroughMenu } from './runmenu.js'
import { importedTurns } from './chatfile.js'
import { branchButton, chatActions, foldContinuations, swipeButtons } from './chat-actions.js'
import { worldInfoPanel } from './worldinfo.js'
import { authorsNotePanel, noteWhyLine } from './authors-note.js'
import { estimateTokens, nextPromptLine } from './tokens.js'
import { cardScriptsPanel } from './card-scripts.js'

/** Messages drawn at first; "Show earlier messages" adds this many more each time. */
const PAGE = UNPAGED ? Infinity : 50

/**
 * A playthrough: its opening draft while it has not started (opening.js), then the chat. The
 * first send of a draft hands its reserved session to the chat, which sends the text once its
 * event stream is followed (so the first reply streams in like every other).
 */
export function chatView(main, playthroughId) {
  let dispose = null
  let gone = false
  const show = (view) => {
    if (gone) return
    if (dispose) dispose()
    dispose = view()
  }
  const chat = (firstSend) => show(() => chatScreen(main, playthroughId, { firstSend, onBack: () => show(opening) }))
  const opening = () => openingView(main, playthroughId, { onStarted: (receipt) => chat(receipt) })
  attempt(async () => {
    await play.loadCatalog()
    const row = play.playthrough(playthroughId)
    const draftId = play.draftIdOf(row)
    if (draftId && (play.isUnstarted(row) || (await drafts.load(draftId)).draft.status !== 'materialized')) show(opening)
    else chat(null)
  })
  return () => {
    gone = true
    if (dispose) dispose()
  }
}

/** A read-only message of an imported chat (its import context). */
function importedArticle(who, role, html) {
  const body = h('div', { class: 'body' })
  setHtml(body, html)
  return h('article', { class: `msg ${role} imported`, 'aria-label': who },
    h('header', {}, who, h('span', { class: 'muted' }, ` · ${t('importedMark')}`)), body)
}

function chatScreen(main, playthroughId, { firstSend, onBack }) {
  let row = null
  let character = null
  let greetingIndex = 0
  let scripts = []
  let head = null
  let data = { messages: [], stoppedRequest: null }
  let qas = []
  let limit = PAGE
  let streaming = null
  let turnOpen = false
  let closeStream = null
  let editing = null
  let editDraft = null // what is typed in the editor, kept across redraws and failed saves
  let reloadTimer = null
  let partials = 0
  let imported = null // an imported run's earlier story (its import context), shown read-only
  /** Imported QAs shown at most (the newest); the rest stay in the file and the export. */
  const IMPORTED_SHOWN = 50
  const draftKey = `innkeeper.webui.draft.${playthroughId}`

  const log = h('div', { class: 'log', role: 'log', 'aria-label': t('message') + 's' })
  const notice = h('div', { class: 'notice' })
  const connection = h('p', { class: 'notice', role: 'status', hidden: true }, t('reconnecting'))
  const practice = practiceNotice()
  const { box, button: sendButton } = composer(draftKey, () => send())
  const stopButton = h('button', { type: 'button', disabled: true, onclick: () => stop() }, t('stop'))
  let streamKind = 'normal' // the open turn's kind (docs/sessions.md "Turn kinds")
  const undoBox = h('div', { class: 'undo' })
  const actions = chatActions({
    playthroughId, box, undoBox, head: () => head, busy: () => turnOpen, qas: () => qas,
    onTurn: () => { turnOpen = true; stopButton.disabled = false },
  })
  const why = whyPanel(() => head, [noteWhyLine])
  const openNew = (create) => attempt(async () => go(`#/play/${encodeURIComponent(await create())}`))
  const setup = setupPanel(() => head, {
    onNewChat: () => openNew(() => play.createFrom(character, head)),
    onNewChatFromTemplate: (templateId) => openNew(() => play.createFromTemplate(character, templateId)),
  })
  const whyToggle = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'why-panel',
    onclick: () => toggle(whyToggle, why.el, () => why.refresh()) }, t('why'))
  const setupToggle = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'setup-panel',
    onclick: () => toggle(setupToggle, setup.el, () => setup.refresh()) }, t('sessionSetup'))
  const worldInfo = worldInfoPanel(() => head)
  const worldInfoToggle = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'worldinfo-panel',
    onclick: () => toggle(worldInfoToggle, worldInfo.el, () => worldInfo.refresh()) }, t('worldInfo'))
  const note = authorsNotePanel(() => head)
  const noteToggle = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'authors-note-panel',
    onclick: () => toggle(noteToggle, note.el, () => note.refresh()) }, t('authorsNote'))
  const nextPrompt = nextPromptLine()
  const cardScripts = cardScriptsPanel() // docs/webui.md "Card scripts"
  const heading = h('h1', {}, '')
  const menu = playthroughMenu(playthroughId, {
    character: () => character,
    greetingIndex: () => greetingIndex,
    title: () => title(play.playthrough(playthroughId) || row),
  })
  const backLink = h('a', { href: '#/library' }, `← ${t('back')}`)

  function toggle(button, panel, refresh) {
    const open = panel.hidden
    panel.hidden = !open
    button.setAttribute('aria-expanded', String(open))
    if (open) {
      refresh()
      panel.focus()
    }
  }

  async function send() {
    const text = box.value
    if (!text.trim()) return
    sendButton.disabled = true
    // One request id per draft: resending after a lost answer never sends the text twice.
    const idKey = `${draftKey}.requestId`
    const requestId = sessionStorage.getItem(idKey) || `req-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`
    sessionStorage.setItem(idKey, requestId)
    try {
      await playSessions.send(head, text, requestId)
      box.value = ''
      sessionStorage.removeItem(draftKey)
      sessionStorage.removeItem(idKey)
      turnOpen = true
      stopButton.disabled = false
    } catch (err) {
      showError(err) // the text stays in the box
    } finally {
      sendButton.disabled = false
    }
  }

  let left = false
  function leave() {
    if (left) return
    left = true
    onBack()
  }

  /** Release the draft's unsent reservation and show the opening again, with the text kept. */
  async function back() {
    const answer = await attempt(() => drafts.backToOpening(play.draftIdOf(row)))
    if (answer === undefined) return
    if (!answer.released) return load().catch(showError) // the first send got in meanwhile
    sessionStorage.removeItem(`${draftKey}.requestId`) // that request id belonged to the released session
    if (!box.value && answer.draft.lastInput) sessionStorage.setItem(draftKey, answer.draft.lastInput)
    leave()
  }

  async function stop() {
    await attempt(() => sessions.cancel(head))
  }

  function scheduleReload() {
    clearTimeout(reloadTimer)
    reloadTimer = setTimeout(() => load(), 30)
  }

  function follow(after) {
    if (closeStream) closeStream()
    const followed = head
    closeStream = sessions.stream(head, after, (type, payload) => {
      if (followed !== head) return
      if (type === 'turn/start') {
        turnOpen = true
        stopButton.disabled = false
        streamKind = (payload.data && payload.data.kind) || 'normal'
        // An impersonation streams into the message box, a continuation into the last reply.
        streaming = streamKind === 'impersonate' ? null : { text: '', continues: streamKind === 'continue' }
        draw()
      } else if (type === 'assistant/partial' && streamKind === 'impersonate') {
        actions.impersonatePartial(payload.text)
      } else if (type === 'assistant/partial') {
        partials += 1
        if (!streaming) streaming = { text: '' }
        streaming.text += payload.text
        const el = log.querySelector(streaming.continues ? '.continuation' : '.streaming .body')
        if (el) el.textContent = streaming.text
        else draw()
        log.dataset.partials = String(partials)
      } else if (type === 'user/message') {
        scheduleReload()
      } else if (type === 'turn/end') {
        turnOpen = false
        streamKind = 'normal'
        streaming = null
        stopButton.disabled = true
        const reason = payload.data && payload.data.reason
        announce(reason && reason.kind === 'interrupted' ? t('stopped') : '')
        scheduleReload()
      }
    }, {
      busy: () => turnOpen,
      onLost: () => {
        if (followed === head) connection.hidden = false
      },
      onOpen: (reconnected) => {
        if (followed !== head || !reconnected) return
        connection.hidden = true
        // Reply text streamed while the stream was down is not replayed: start the live copy
        // afresh and re-read the messages (the final reply is durable, so it shows once).
        streaming = null
        load().catch(showError)
      },
    })
  }

  // One load at a time: a reload asked for while one runs (a reconnect and a turn/end together)
  // runs once after it, so this tab never races itself on the timeline's revision.
  let loading = null
  let loadAgain = false
  function load() {
    if (loading) {
      loadAgain = true
      return loading
    }
    loading = (async () => {
      try {
        do {
          loadAgain = false
          await loadOnce()
        } while (loadAgain)
      } finally {
        loading = null
      }
    })()
    return loading
  }

  async function loadOnce() {
    const current = play.headSession(playthroughId)
    if (!current) return // a released draft: the opening view takes over
    const headChanged = current !== head
    head = current
    const [messages, info, chosen, display] = await Promise.all([
      playSessions.messages(head), sessions.inspect(head), selection.character(head),
      displayScripts(head, character.id)])
    scripts = display
    data = { ...messages, messages: foldContinuations(messages.messages) }
    turnOpen = info.turnOpen
    greetingIndex = (chosen.selection && chosen.selection.character && chosen.selection.character.greetingIndex) || 0
    stopButton.disabled = !turnOpen
    // The QAs go with the messages: reconcile's timeline update redraws before it returns.
    qas = play.qaTurns(data.messages)
    if (imported === null) imported = (await importedTurns(row).catch(() => null)) || false
    await play.reconcile(playthroughId, data.messages)
    if (headChanged) follow(data.throughSeq)
    await draw()
    if (why.el.hidden === false) why.refresh()
    if (!turnOpen) nextPrompt.refresh(head, box.value)
    // Not awaited: the chat never waits for card scripts.
    const step = play.onPath(play.timeline(playthroughId)).at(-1)
    cardScripts.update({
      character, playthroughId, sessionId: head, replies: qas.length, greetingIndex,
      head: step && step.variant.sessionId === head && qas.length
        ? { nodeId: step.node.id, variantId: step.variant.id, endEventId: step.variant.endEventId, edited: step.node.displayOverride ?? null } : null,
    })
  }

  function visible() {
    return data.messages.filter((m) => m.origin && (m.origin.kind === 'user' || m.origin.kind === 'assistant' || m.origin.kind === 'steering') && (m.text || '').length)
  }

  function greetingArticle(html) {
    const index = Math.min(greetingIndex, greetingsOf(character).length - 1)
    // A run made from a draft chose its greeting there; an older run picks it on its session.
    const locked = qas.length > 0 || turnOpen || data.messages.length > 0 || play.draftIdOf(row)
    return greetingOf(character, html, index, locked ? null : pickGreeting)
  }

  async function pickGreeting(index) {
    if (await attempt(() => play.setGreeting(playthroughId, index)) === undefined) return
    greetingIndex = index
    await draw()
    focusPicker(log, index)
  }

  function replyActions(m, k) {
    const node = play.path(play.timeline(playthroughId))[k]
    const last = k === qas.length - 1 && !turnOpen
    const act = (label, fn, extra = {}) => h('button', { type: 'button', class: 'small', ...extra, onclick: fn }, label)
    return h('div', { class: 'actions' },
      last ? swipeButtons(playthroughId, node, qas[k], () => { streaming = { text: '' } }) : null,
      act(t('copy'), () => navigator.clipboard?.writeText(node && node.displayOverride !== null && node.displayOverride !== undefined ? node.displayOverride : m.text).then(() => announce(t('copied')), () => {})),
      act(t('edit'), () => { editing = k; editDraft = null; draw() }),
      branchButton(playthroughId, k, qas[k], character, { disabled: turnOpen, route: (id) => `#/play/${encodeURIComponent(id)}` }),
      act(t('continueHere'), () => attempt(() => play.continueFrom(playthroughId, k, qas[k].reply.endTurn || qas[k].turn)), { disabled: turnOpen || k === qas.length - 1 }),
      actions.replyButtons(k, qas.length, turnOpen))
  }

  function editor(k, text) {
    const node = play.path(play.timeline(playthroughId))[k]
    const area = h('textarea', { rows: 6, 'aria-label': t('edit'), oninput: () => (editDraft = area.value) })
    area.value = editDraft ?? text
    setTimeout(() => area.focus(), 0)
    return h('div', { class: 'editor' }, area,
      h('button', { type: 'button', onclick: async () => {
        try {
          editing = null
          await play.setDisplayOverride(playthroughId, node.id, area.value)
          editDraft = null
        } catch (err) {
          editing = k // the draft stays open with what was typed
          showError(err)
        }
        draw()
      } }, t('save')),
      h('button', { type: 'button', onclick: () => { editing = null; editDraft = null; draw() } }, t('cancel')))
  }

  // Draws overlap while their Markdown renders: only the newest mounts, so a draw made from
  // older messages or QAs that answers last never covers it.
  const draw = newestOnly(async (stale) => {
    if (!character) return
    const nodes = play.path(play.timeline(playthroughId))
    const shown = visible()
    const page = shown.slice(Math.max(0, shown.length - limit))
    const qaIndex = new Map(qas.map((qa, k) => [qa.reply.id, k]))
    const textOf = (m) => {
      const k = qaIndex.get(m.id)
      const node = k === undefined ? null : nodes[k]
      const text = node && typeof node.displayOverride === 'string' ? node.displayOverride : m.text
      return fillMacros(applyDisplay(text, scripts, m.role === 'user' ? USER_INPUT : AI_OUTPUT), character)
    }
    const all = greetingsOf(character)
    const greetingText = fillMacros(applyDisplay(all[Math.min(greetingIndex, all.length - 1)] || '', scripts, AI_OUTPUT), character)
    const old = imported && shown.length <= page.length ? imported.qa.slice(-IMPORTED_SHOWN) : []
    const oldTexts = old.flatMap((qa) => [fillMacros(qa.user, character), fillMacros(qa.assistant, character)])
    const html = await renderAll([imported ? fillMacros(imported.greeting, character) : greetingText, ...page.map(textOf), ...oldTexts])
    const importedArticles = !imported || shown.length > page.length ? null : [
      imported.qa.length > old.length ? h('p', { class: 'muted' }, t('importedHidden', { n: imported.qa.length - old.length })) : null,
      imported.greeting ? importedArticle(character.name, 'assistant', html[0]) : null,
      old.map((qa, i) => [
        importedArticle(t('you'), 'user', html[1 + page.length + 2 * i]),
        importedArticle(character.name, 'assistant', html[2 + page.length + 2 * i]),
      ]),
    ]
    if (stale()) return
    const articles = page.map((m, i) => {
      const k = qaIndex.get(m.id)
      const isReply = k !== undefined
      const node = isReply ? nodes[k] : null
      const body = h('div', { class: 'body' })
      if (isReply && editing === k) body.append(editor(k, nodes[k] && typeof nodes[k].displayOverride === 'string' ? nodes[k].displayOverride : m.text))
      else setHtml(body, html[i + 1])
      const who = m.role === 'assistant' ? character.name : t('you')
      return h('article', { class: `msg ${m.role}`, 'aria-label': who, dataset: { seq: m.seq } },
        h('header', {}, who, node && typeof node.displayOverride === 'string' ? h('span', { class: 'muted' }, ` · ${t('edited')}`) : null,
          h('span', { class: 'muted tokens' }, ` · ${t('tokens', { n: estimateTokens(m.text) })}`)),
        body, isReply ? replyActions(m, k) : null)
    })
    const earlier = shown.length > page.length
      ? h('button', { type: 'button', class: 'more', onclick: () => { limit += PAGE; draw() } }, `${t('showEarlier')} (${shown.length - page.length})`)
      : null
    const lastBody = streaming && streaming.continues ? articles.at(-1)?.querySelector('.body') : null
    if (lastBody) lastBody.append(h('span', { class: 'continuation' }, streaming.text))
    const stream = streaming && !streaming.continues ? h('article', { class: 'msg assistant streaming', 'aria-label': character.name, 'aria-busy': 'true' },
      h('header', {}, character.name, h('span', { class: 'muted' }, ` · ${t('streaming')}`)),
      h('div', { class: 'body' }, streaming.text)) : null
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40
    mount(log, earlier, importedArticles || (shown.length > page.length ? null : greetingArticle(html[0])), articles, stream)
    if (atBottom || streaming) log.scrollTop = log.scrollHeight
    drawNotice()
    heading.textContent = title(play.playthrough(playthroughId) || row)
  })

  function drawNotice() {
    const stopped = data.stoppedRequest
    // A draft's reserved session that never got its first message: the opening can come back.
    if (play.draftIdOf(row) && !data.messages.length && !turnOpen) {
      return mount(notice, h('p', {}, t('firstSendPending'), ' ',
        h('button', { type: 'button', onclick: () => back() }, t('backToOpening'))))
    }
    const failed = data.failedTurn
    if (failed && !turnOpen) {
      // The model server could not be reached or refused the key (or failed otherwise): its
      // own reason, the way to the model settings, and a retry of the same words. The player's
      // message stays in the chat; nothing typed is lost.
      const user = data.messages.find((m) => m.seq === failed.userEventId)
      return mount(notice, h('div', { class: 'notice failed', role: 'alert' },
        h('span', {}, t('turnFailed', { reason: `${failed.message || ''} (${failed.code || 'ERROR'})` })),
        h('button', { type: 'button', onclick: () => go('#/settings/model') }, t('openModelSettings')),
        user ? h('button', { type: 'button', onclick: () => attempt(() => play.retryStopped(playthroughId, failed, user.text)) }, t('retry')) : null))
    }
    if (!stopped || turnOpen) return mount(notice)
    const user = data.messages.find((m) => m.seq === stopped.userEventId)
    mount(notice, h('p', {}, t('stoppedRequest'), ' ',
      h('button', { type: 'button', onclick: () => attempt(() => play.retryStopped(playthroughId, stopped, user ? user.text : '')) }, t('retry'))))
  }

  mount(main,
    h('div', { class: 'play' },
      h('div', { class: 'chat' },
        h('div', { class: 'chat-head' },
          backLink,
          heading, h('span', { class: 'spacer' }), menu.button, setupToggle, worldInfoToggle, noteToggle, whyToggle),
        menu.el,
        practice, log, connection, notice, undoBox,
        h('div', { class: 'composer' }, box, h('div', { class: 'composer-actions' }, sendButton, actions.impersonateButton, stopButton)), nextPrompt.el,
        cardScripts.el),
      setup.el, worldInfo.el, note.el, why.el))

  const off = play.onChange(() => {
    if (!character) return
    const next = play.headSession(playthroughId)
    // The draft's unsent reservation was released (here or in another tab): the opening is back.
    if (!next && play.draftIdOf(row)) leave()
    else if (next !== head) load().catch(showError)
    else draw()
  })
  attempt(async () => {
    await play.loadCatalog()
    row = play.playthrough(playthroughId)
    if (!row) {
      mount(main, h('p', {}, '404'), h('a', { href: '#/library' }, t('library')))
      return
    }
    backLink.href = `#/character/${encodeURIComponent(play.characterIdOf(row))}`
    await play.loadTimeline(playthroughId)
    character = (await characters.get(play.characterIdOf(row))).character
    await load()
    ready('play')
    box.focus()
    // The draft's first send: its session is reserved and followed now, so send it (with the
    // reserved request id: a resend never sends twice).
    if (firstSend && firstSend.accepted) {
      box.value = '' // it was sent already (another tab, or an answer lost after the send)
      sessionStorage.removeItem(draftKey)
    } else if (firstSend) {
      box.value = firstSend.text
      sessionStorage.setItem(draftKey, firstSend.text)
      sessionStorage.setItem(`${draftKey}.requestId`, firstSend.requestId)
      await send()
    }
  })
  return () => {
    off()
    if (closeStream) closeStream()
    clearTimeout(reloadTimer)
    cardScripts.dispose()
  }
}
