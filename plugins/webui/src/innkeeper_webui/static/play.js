// Playthroughs: a catalog of runs per character and, per run, a timeline of QA nodes whose reply
// variants are real host sessions (swipes and branches are forks). The documents have the shape
// of the v2 play workspace's catalog.json / timeline.json (spec/API.md "v2 Tavern-owned
// interfaces"); until those routes are on the server they are kept in this browser, and the
// `storage` event keeps two tabs consistent. Every write re-reads the document and re-applies
// the intent, the same replay a CAS conflict needs.

import { sessions, selection } from './api.js'

const KEY = 'innkeeper.webui.play.v1'
const listeners = new Set()

function read() {
  try {
    const doc = JSON.parse(localStorage.getItem(KEY) || 'null')
    if (doc && doc.schemaVersion === 1) return doc
  } catch {
    // A corrupt document reads as empty; the next write replaces it.
  }
  return { schemaVersion: 1, revision: 0, catalog: { playthroughs: [] }, timelines: {} }
}

/** Apply `mutate(doc)` to a fresh copy and store it; returns what `mutate` returned. */
function update(mutate) {
  const doc = read()
  const result = mutate(doc)
  doc.revision += 1
  localStorage.setItem(KEY, JSON.stringify(doc))
  for (const fn of listeners) fn()
  return result
}

window.addEventListener('storage', (ev) => {
  if (ev.key === KEY) for (const fn of listeners) fn()
})

/** Call `fn` whenever the documents change (here or in another tab). */
export function onChange(fn) {
  listeners.add(fn)
  return () => listeners.delete(fn)
}

const newId = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`

export function playthroughs(characterId) {
  return read().catalog.playthroughs.filter((p) => p.characterId === characterId)
}

export function playthrough(id) {
  return read().catalog.playthroughs.find((p) => p.id === id) || null
}

export function timeline(id) {
  return read().timelines[id] || { nodes: [], head: null }
}

/** The session the chat shows: the timeline head, or the run's root session. */
export function headSession(id) {
  const tl = timeline(id)
  return (tl.head && tl.head.sessionId) || (playthrough(id) || {}).rootSessionId || null
}

/** Create a run for `character`: a real blank host session bound to the card. */
export async function create(character, greetingIndex = 0) {
  const number = Math.max(0, ...read().catalog.playthroughs.filter((p) => p.characterId === character.id).map((p) => p.number)) + 1
  const { session } = await sessions.create(`${character.name} · ${number}`)
  await selection.bindCharacter(session.id, character.id, { greetingIndex })
  const id = newId('playthrough')
  update((doc) => {
    doc.catalog.playthroughs.push({
      id, characterId: character.id, number, name: null, rootSessionId: session.id,
      greetingIndex, createdAt: new Date().toISOString(), ext: {},
    })
    doc.timelines[id] = { nodes: [], head: { sessionId: session.id, nodeId: null, variantId: null } }
  })
  return id
}

export function rename(id, name) {
  update((doc) => {
    const row = doc.catalog.playthroughs.find((p) => p.id === id)
    if (row) row.name = name.trim() || null
  })
}

export function setArchived(id, archived) {
  update((doc) => {
    const row = doc.catalog.playthroughs.find((p) => p.id === id)
    if (!row) return
    if (archived) row.ext = { ...row.ext, pmpDshTavern: { archivedAt: row.ext?.pmpDshTavern?.archivedAt || new Date().toISOString() } }
    else if (row.ext) delete row.ext.pmpDshTavern
  })
}

export function isArchived(row) {
  return Boolean(row.ext && row.ext.pmpDshTavern && row.ext.pmpDshTavern.archivedAt)
}

export async function setGreeting(id, greetingIndex) {
  const row = playthrough(id)
  await selection.bindCharacter(headSession(id), row.characterId, { greetingIndex })
  update((doc) => {
    doc.catalog.playthroughs.find((p) => p.id === id).greetingIndex = greetingIndex
  })
}

/** The completed QA turns of a message list, in order: [{turn, user, reply}]. */
export function qaTurns(messages) {
  const byTurn = new Map()
  for (const m of messages) {
    if (m.turn === null || m.turn === undefined) continue
    if (!byTurn.has(m.turn)) byTurn.set(m.turn, { turn: m.turn, user: null, reply: null })
    const qa = byTurn.get(m.turn)
    if (m.role === 'user' && m.origin && m.origin.kind === 'user' && !qa.user) qa.user = m
    if (m.role === 'assistant' && !m.incompleteTurn) qa.reply = m
  }
  return [...byTurn.values()].filter((qa) => qa.reply)
}

/** Make the timeline agree with the head session's history: one node per completed QA. */
export function reconcile(id, messages) {
  const qas = qaTurns(messages)
  return update((doc) => {
    const tl = doc.timelines[id] || (doc.timelines[id] = { nodes: [], head: null })
    const head = (tl.head && tl.head.sessionId) || doc.catalog.playthroughs.find((p) => p.id === id).rootSessionId
    for (let k = tl.nodes.length; k < qas.length; k++) {
      const variantId = newId('variant')
      const node = { id: newId('qa'), kind: 'qa', displayOverride: null, adoptedVariantId: variantId,
        parentVariantId: k > 0 ? tl.nodes[k - 1].adoptedVariantId : null,
        variants: [{ id: variantId, sessionId: head, turn: qas[k].turn }] }
      tl.nodes.push(node)
    }
    for (const [k, node] of tl.nodes.entries()) {
      const variant = node.variants.find((v) => v.id === node.adoptedVariantId)
      if (variant && variant.sessionId === head && qas[k]) variant.turn = qas[k].turn
    }
    const last = tl.nodes[tl.nodes.length - 1]
    tl.head = { sessionId: head, nodeId: last ? last.id : null, variantId: last ? last.adoptedVariantId : null }
    return tl
  })
}

/** The seqs of a turn's turn/start and turn/end in a session's history. */
async function turnBounds(sessionId, turn) {
  let beforeSeq
  let throughSeq
  const found = {}
  for (let pages = 0; pages < 64; pages++) {
    const page = await sessions.history(sessionId, { beforeSeq, throughSeq, limit: 500 })
    throughSeq = page.throughSeq
    for (const ev of page.events) {
      if (ev.data.type === 'turn/start' && ev.data.turn === turn) found.start = ev.seq
      if (ev.data.type === 'turn/end' && ev.data.turn === turn) found.end = ev.seq
    }
    if (found.start !== undefined || !page.hasMore) break
    beforeSeq = page.nextBeforeSeq
  }
  return found
}

/** Fork `sessionId` just before `turn` started and send its user text again. */
async function rerun(sessionId, turn, text) {
  const { start } = await turnBounds(sessionId, turn)
  if (start === undefined) throw new Error(`turn ${turn} not found`)
  const { session } = await sessions.fork(sessionId, start - 1)
  await sessions.prompt(session.id, text)
  return session.id
}

/** A new reply variant of the last QA node (a swipe). */
export async function regenerate(id, qa) {
  const sessionId = await rerun(headSession(id), qa.turn, qa.user.text)
  update((doc) => {
    const t = doc.timelines[id]
    const n = t.nodes[t.nodes.length - 1]
    const variantId = newId('variant')
    n.variants.push({ id: variantId, sessionId, turn: null })
    n.adoptedVariantId = variantId
    t.head = { sessionId, nodeId: n.id, variantId }
  })
  return sessionId
}

/** Retry a request that was stopped before any reply: the same text on a fork before it. */
export async function retryStopped(id, stopped, text) {
  const { session } = await sessions.fork(headSession(id), stopped.turnStartEventId - 1)
  await sessions.prompt(session.id, text)
  update((doc) => {
    const t = doc.timelines[id]
    t.head = { ...(t.head || {}), sessionId: session.id }
  })
}

/** Show another variant of node `k` (only the last node can be swiped). */
export function swipe(id, delta) {
  update((doc) => {
    const t = doc.timelines[id]
    const n = t.nodes[t.nodes.length - 1]
    const i = n.variants.findIndex((v) => v.id === n.adoptedVariantId)
    const next = n.variants[Math.min(n.variants.length - 1, Math.max(0, i + delta))]
    n.adoptedVariantId = next.id
    t.head = { sessionId: next.sessionId, nodeId: n.id, variantId: next.id }
  })
}

export function setDisplayOverride(id, nodeIndex, text) {
  update((doc) => {
    const n = doc.timelines[id].nodes[nodeIndex]
    n.displayOverride = text === null ? null : { text }
  })
}

async function forkAfter(id, turn) {
  // The head session holds every turn of the shown path with the seqs it was written at.
  const head = headSession(id)
  const { end } = await turnBounds(head, turn)
  if (end === undefined) throw new Error(`turn ${turn} has not ended`)
  const { session } = await sessions.fork(head, end)
  return session.id
}

/** Go back to node `k` in this run: later nodes leave the path, a fork continues from there. */
export async function continueFrom(id, nodeIndex, turn) {
  const sessionId = await forkAfter(id, turn)
  update((doc) => {
    const t = doc.timelines[id]
    t.nodes = t.nodes.slice(0, nodeIndex + 1)
    const n = t.nodes[nodeIndex]
    const old = n.variants.find((v) => v.id === n.adoptedVariantId)
    const variantId = newId('variant')
    n.variants.push({ id: variantId, sessionId, turn: old.turn ?? turn })
    n.adoptedVariantId = variantId
    t.head = { sessionId, nodeId: n.id, variantId }
  })
}

/** Branch at node `k` into a new run of the same character. */
export async function branch(id, nodeIndex, turn) {
  const sessionId = await forkAfter(id, turn)
  const source = playthrough(id)
  const tl = timeline(id)
  const newIdValue = newId('playthrough')
  update((doc) => {
    const number = Math.max(0, ...doc.catalog.playthroughs.filter((p) => p.characterId === source.characterId).map((p) => p.number)) + 1
    doc.catalog.playthroughs.push({
      id: newIdValue, characterId: source.characterId, number, name: null, rootSessionId: sessionId,
      greetingIndex: source.greetingIndex, createdAt: new Date().toISOString(),
      ext: { innkeeperWebui: { branchedFrom: { playthroughId: id, nodeIndex } } },
    })
    const nodes = tl.nodes.slice(0, nodeIndex + 1).map((n) => {
      const v = n.variants.find((x) => x.id === n.adoptedVariantId)
      return { ...n, variants: [v] }
    })
    const last = nodes[nodes.length - 1]
    last.variants = [{ ...last.variants[0], sessionId }]
    doc.timelines[newIdValue] = { nodes, head: { sessionId, nodeId: last.id, variantId: last.adoptedVariantId } }
  })
  return newIdValue
}
