// Opening drafts (docs/play.md "Opening drafts"; docs/contract/openings.md#opening-drafts): a
// new playthrough's greeting and opening variables, edited with no host session until the first
// send materializes one.
//
// Each draft answer is cached with its integer revision. An edit is an intent applied to the
// freshest copy: on 409 DRAFT_REVISION_CONFLICT the draft is read again and the intent replayed
// (at most REPLAYS times), as play.js does for the workspace documents. The first send keeps its
// operationId (per tab, with the text), so a retry after a lost answer gets the same session and
// request id, never a second one. Other tabs hear about changes on a BroadcastChannel.

import { ApiError, drafts as api, sessions } from './api.js'
import { t } from './i18n.js'
import { parseValue, setPath } from './mvu.js'
import * as play from './play.js'

const REPLAYS = 3
const cache = new Map() // draftId -> {draft, playthrough, opening}
const listeners = new Set()
const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('innkeeper.webui.drafts') : null

function notify() {
  for (const fn of [...listeners]) fn()
}

if (channel) {
  channel.onmessage = async (ev) => {
    const id = ev.data && ev.data.draftId
    if (typeof id !== 'string') return
    cache.delete(id)
    await read(id).catch(() => null)
    notify()
  }
}

/** Call `fn` whenever a draft changes (here or in another tab). */
export function onChange(fn) {
  listeners.add(fn)
  return () => listeners.delete(fn)
}

function publish(id, answer) {
  cache.set(id, answer)
  if (channel) channel.postMessage({ draftId: id })
  notify()
}

/** Read the draft from the server (and cache it). */
export async function read(id) {
  const answer = await api.get(id)
  cache.set(id, answer)
  return answer
}

/** The cached draft answer, or a fresh read. */
export async function load(id) {
  return cache.get(id) || read(id)
}

/** Apply `intent(answer)` (a PUT body, or `null` for nothing to do) with CAS and replay. */
async function edit(id, intent) {
  for (let attempt = 0; ; attempt++) {
    const answer = await load(id)
    const body = intent(answer)
    if (body === null) return answer
    try {
      const updated = await api.update(id, { ...body, expectedRevision: answer.draft.revision })
      publish(id, updated)
      return updated
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'DRAFT_REVISION_CONFLICT' || attempt >= REPLAYS) throw err
      cache.delete(id)
    }
  }
}

/** Choose the greeting (0 is first_mes, then the alternate greetings). */
export function selectGreeting(id, greetingIndex) {
  return edit(id, (a) => (a.draft.selection.greetingIndex === greetingIndex ? null : { selection: { greetingIndex } }))
}

/** An edit meant for one greeting's opening refuses to land on another's (another tab switched). */
function sameGreeting(answer, greetingIndex) {
  if (answer.opening.greetingIndex !== greetingIndex) {
    throw new ApiError(409, 'DRAFT_REVISION_CONFLICT', t('openingChanged'))
  }
}

/** Set one opening variable (`path` in `stat_data`) of greeting `greetingIndex` to what was typed. */
export function setVariable(id, greetingIndex, path, text) {
  return edit(id, (a) => {
    sameGreeting(a, greetingIndex)
    const variables = structuredClone(a.opening.variables)
    setPath(variables.stat_data, path, parseValue(text))
    return { variables }
  })
}

/** Drop the player's edits of greeting `greetingIndex`'s opening. */
export function resetVariables(id, greetingIndex) {
  return edit(id, (a) => {
    sameGreeting(a, greetingIndex)
    return a.opening.edited ? { resetVariables: true } : null
  })
}

const firstSendKey = (id) => `innkeeper.webui.firstSend.${id}`
const newOperationId = () => `webui-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`

/**
 * Reserve the first send's session (`POST …/materialize`): `{sessionId, requestId, accepted}`.
 * Nothing is sent; the caller sends `text` with `requestId` unless `accepted`. The operationId
 * is kept with the text, so pressing Send again after a lost answer replays the same
 * reservation; a reservation for another text (typed anew, or made in another tab) that was
 * never sent is released first.
 */
export async function reserve(id, text) {
  let op = JSON.parse(sessionStorage.getItem(firstSendKey(id)) || 'null')
  if (op && op.text !== text) op = null
  for (let attempt = 0; ; attempt++) {
    let answer = await read(id) // fresh: another tab may have reserved or started it
    const held = answer.draft.materialize
    if (held && (!op || held.operationId !== op.operationId)) {
      // Never cancel a run that started (cancel would stop its reply): only a blank reservation.
      if (held.sessionId && answer.draft.status === 'materialized') {
        const info = await sessions.inspect(held.sessionId)
        if (info.turnOpen || info.lastTurn > 0) throw new ApiError(409, 'DRAFT_MATERIALIZED', t('openingStarted'))
      }
      answer = await api.cancel(id)
      cache.set(id, answer)
      if (!answer.released) throw new ApiError(409, 'DRAFT_MATERIALIZED', t('openingStarted'))
    }
    if (!op) {
      op = { operationId: newOperationId(), text }
      sessionStorage.setItem(firstSendKey(id), JSON.stringify(op))
    }
    try {
      const receipt = await api.materialize(id, answer.draft.revision, op.operationId, text)
      sessionStorage.removeItem(firstSendKey(id))
      await read(id).catch(() => cache.delete(id))
      publish(id, cache.get(id) || answer)
      await play.refreshCatalog() // the row has its rootSessionId now
      return receipt
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'DRAFT_REVISION_CONFLICT' || attempt >= REPLAYS) throw err
      cache.delete(id)
    }
  }
}

/**
 * "Back to opening": release a reserved first send that was never accepted; the draft is open
 * again and its `lastInput` is the text of that send. Once the send was accepted the session is
 * kept (the answer says `stopped`, `released: false`).
 */
export async function backToOpening(id) {
  const answer = await api.cancel(id)
  sessionStorage.removeItem(firstSendKey(id))
  cache.set(id, answer)
  await play.refreshCatalog()
  publish(id, answer)
  return answer
}
