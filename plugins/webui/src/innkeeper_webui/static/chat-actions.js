// Impersonate, Continue and Delete in a chat (docs/webui.md "Impersonate, continue, delete").
//
// Continue and impersonate are turn kinds of the host (docs/sessions.md "Turn kinds"): a
// continuation is a message of its own in the log that names the reply it extends, shown here
// folded into that reply; an impersonation's text goes into the message box and nowhere else.
// Deleting moves the playthrough onto a branch that ends before the deleted message; the old
// path stays in the log, so Undo (while the page is open) only moves the timeline back.

import { h, announce } from './core.js'
import { extendText, t } from './i18n.js'
import { playSessions } from './api.js'
import * as play from './play.js'
import { attempt, go, showError } from './ui.js'

extendText({
  en: {
    impersonate: 'Impersonate',
    continueReply: 'Continue',
    deleteMessage: 'Delete message',
    deleteFromHere: 'Delete from here',
    deleted: 'Messages deleted.',
    undo: 'Undo',
    impersonating: 'Writing your message…',
    impersonated: 'Your next message is in the box: edit it, then send.',
  },
  zh: {
    impersonate: '代写',
    continueReply: '继续',
    deleteMessage: '删除消息',
    deleteFromHere: '从这里删除',
    deleted: '消息已删除。',
    undo: '撤销',
    impersonating: '正在代写你的消息…',
    impersonated: '你的下一条消息已在输入框中：修改后发送。',
  },
})

/**
 * The messages a chat shows: each continuation (an assistant message whose `continues` names
 * another) is folded into the reply it extends — text appended, `endTurn`/`endSeq` saying where
 * the whole reply ends now (a branch after it keeps the continuation).
 */
export function foldContinuations(messages) {
  const byId = new Map()
  const out = []
  for (const m of messages) {
    const root = m.role === 'assistant' && m.continues ? byId.get(m.continues) : null
    if (root) {
      root.text += m.text || ''
      root.endTurn = m.turn
      root.endSeq = m.seq
      root.incompleteTurn = root.incompleteTurn || m.incompleteTurn
      continue
    }
    const copy = m.role === 'assistant' ? { ...m } : m
    if (m.role === 'assistant') byId.set(m.id, copy)
    out.push(copy)
  }
  return out
}

const act = (label, fn, extra = {}) => h('button', { type: 'button', class: 'small', ...extra, onclick: fn }, label)

/**
 * The swipe arrows (‹ i/n ›) and Regenerate of the last reply, `node` the shown path's last QA
 * node and `qa` its turn; shared by the chat and the group page. `onRegenerate()` runs once the
 * new variant's turn was asked for.
 */
export function swipeButtons(playthroughId, node, qa, onRegenerate = () => {}) {
  const variants = node ? node.variants : []
  const vi = node ? variants.findIndex((v) => v.id === node.adoptedVariantId) : 0
  return [
    act('‹', () => { play.swipe(playthroughId, -1) }, { 'aria-label': t('previousSwipe'), disabled: vi <= 0 }),
    h('span', { class: 'muted' }, t('swipeOf', { i: vi + 1, n: variants.length })),
    act('›', () => { play.swipe(playthroughId, 1) }, { 'aria-label': t('nextSwipe'), disabled: vi >= variants.length - 1 }),
    act(t('regenerate'), () => attempt(async () => {
      await play.regenerate(playthroughId, qa)
      onRegenerate()
    })),
  ]
}

/**
 * Branch at reply `k` (its turn `qa`): a new playthrough of the same character or group that
 * ends with this reply, opened at `route(id)` (the chat's or the group page's address).
 */
export function branchButton(playthroughId, k, qa, character, { disabled, route }) {
  return act(t('branch'), () => attempt(async () => {
    const id = await play.branch(playthroughId, k, qa.reply.endTurn || qa.turn, character)
    announce(t('branched'))
    go(route(id))
  }), { disabled })
}

/**
 * The chat's actions. `ctx` gives the chat's state and hooks: `head()`, `playthroughId`, `box`
 * (the message box), `busy()` (a turn open), `qas()`, `reload()`, `notice` (an element for the
 * undo offer), `onTurn()` (a turn was started here).
 */
export function chatActions(ctx) {
  let impersonating = false
  let undo = null

  async function impersonate() {
    if (ctx.busy() || impersonating) return
    impersonating = true
    impersonateButton.disabled = true
    announce(t('impersonating'))
    const before = ctx.box.value
    ctx.box.value = ''
    try {
      const answer = await playSessions.impersonate(ctx.head())
      // The streamed text is already in the box; the answer is the whole of it.
      ctx.box.value = answer.text
      ctx.box.dispatchEvent(new Event('input'))
      announce(t('impersonated'))
      ctx.box.focus()
    } catch (err) {
      ctx.box.value = before // nothing typed is lost
      showError(err)
    } finally {
      impersonating = false
      impersonateButton.disabled = false
    }
  }

  /** A partial of an impersonate turn: the text grows in the box as it streams. */
  function impersonatePartial(text) {
    ctx.box.value += text
  }

  async function continueReply() {
    if (ctx.busy()) return
    try {
      await playSessions.continueReply(ctx.head())
      ctx.onTurn()
    } catch (err) {
      showError(err)
    }
  }

  async function deleteFrom(k) {
    try {
      const saved = await play.deleteFrom(ctx.playthroughId, k, ctx.qas())
      undo = saved
      showUndo()
      announce(t('deleted'))
    } catch (err) {
      showError(err)
    }
  }

  function showUndo() {
    ctx.undoBox.replaceChildren()
    if (!undo) return
    ctx.undoBox.append(h('p', { class: 'notice' }, t('deleted'), ' ',
      h('button', { type: 'button', onclick: async () => {
        const saved = undo
        undo = null
        ctx.undoBox.replaceChildren()
        try {
          await play.restoreHead(ctx.playthroughId, saved)
        } catch (err) {
          undo = saved
          showUndo()
          showError(err)
        }
      } }, t('undo'))))
  }

  const impersonateButton = h('button', { type: 'button', onclick: () => impersonate() }, t('impersonate'))

  /** The buttons of reply `k` (of `count`) that belong here. */
  function replyButtons(k, count, turnOpen) {
    const last = k === count - 1
    return [
      last ? act(t('continueReply'), () => continueReply(), { disabled: turnOpen }) : null,
      act(last ? t('deleteMessage') : t('deleteFromHere'), () => deleteFrom(k), { disabled: turnOpen }),
    ]
  }

  return {
    impersonateButton,
    replyButtons,
    impersonatePartial,
    isImpersonating: () => impersonating,
  }
}
