// Playthroughs on the v2 play workspace: catalog.json lists the runs, each run's timeline.json
// holds QA nodes whose reply variants are real host sessions (swipes and branches are v2
// branches). Composed from public routes exactly as docs/play.md "Composing a playthrough"
// describes; never a server-side transaction.
//
// Managed documents are cached with their revision. Every write is an intent applied to the
// freshest copy: on 409 PLAY_FILE_REVISION_CONFLICT the document is read again and the intent
// replayed (at most REPLAYS times); side effects (sessions, branches, messages) happen before
// and are never repeated. Other tabs hear about writes on a BroadcastChannel and re-read.

import { ApiError, drafts, groupPlay, playSessions, playthroughsApi, sessions, selection, templates, workspace } from './api.js'

const CATALOG = 'catalog.json'
const REPLAYS = 3
const listeners = new Set()
const cache = new Map() // path -> {doc, revision}
const channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel('innkeeper.webui.play') : null
let binding = null // GET /v2/workspace answer

function notify() {
  for (const fn of [...listeners]) fn()
}

if (channel) {
  channel.onmessage = async (ev) => {
    if (!ev.data || typeof ev.data.path !== 'string') return
    cache.delete(ev.data.path)
    await read(ev.data.path).catch(() => null)
    notify()
  }
}

/** Call `fn` whenever a playthrough document changes (here or in another tab). */
export function onChange(fn) {
  listeners.add(fn)
  return () => listeners.delete(fn)
}

const newId = (prefix) => `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`

// ------------------------------------------------------------------ workspace
/** The workspace binding, read once per page. */
export async function loadWorkspace(force = false) {
  if (!binding || force) binding = await workspace.get()
  return binding
}

export async function bindWorkspace(path) {
  binding = await workspace.bind(path)
  cache.clear()
  previous = null
  notify()
  return binding
}

let previous = null // GET /v2/workspace/previous answer

/**
 * The playthroughs kept in folders bound before the current one ([{rootPath, leftAt, status,
 * playthroughs}], newest first): moving the play folder moves nothing, so they stay there and
 * open again once that folder is bound again.
 */
export async function loadPrevious(force = false) {
  if (!previous || force) previous = (await workspace.previous()).roots
  return previous
}

/** Earlier playthroughs of one character: [{row, rootPath}]. */
export function previousOf(characterId) {
  return (previous || []).flatMap((root) => root.playthroughs
    .filter((row) => row.characterId === characterId && !row.archived)
    .map((row) => ({ row, rootPath: root.rootPath })))
}

/**
 * A mutation binds the server's default play folder when none was bound (docs/play.md): read
 * the binding again after one, so later writes carry its workspace scope.
 */
async function afterFirstWrite() {
  if (!binding || !binding.selected) await loadWorkspace(true)
}

// ------------------------------------------------------------------ managed documents
async function read(path) {
  try {
    const r = await workspace.read(path)
    const entry = { doc: JSON.parse(r.content), revision: r.revision }
    cache.set(path, entry)
    return entry
  } catch (err) {
    if (err instanceof ApiError && err.code === 'PLAY_PATH_NOT_FOUND') {
      const entry = { doc: null, revision: null }
      cache.set(path, entry)
      return entry
    }
    throw err
  }
}

/** What a mutator returns when the fresh document already says what it wanted. */
const UNCHANGED = Symbol('unchanged')

/** Apply `mutate(doc)` (pure intent) to the freshest `path` and store it with CAS. */
async function update(path, mutate, initial) {
  for (let attempt = 0; ; attempt++) {
    const current = cache.get(path) || (await read(path))
    const doc = structuredClone(current.doc ?? initial())
    const result = mutate(doc)
    if (result === UNCHANGED) return undefined
    try {
      const r = await workspace.write(path, JSON.stringify(doc, null, 1), current.revision, binding && binding.workspaceScope)
      cache.set(path, { doc, revision: r.revision })
      if (channel) channel.postMessage({ path })
      notify()
      return result
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'PLAY_FILE_REVISION_CONFLICT' || attempt >= REPLAYS) throw err
      cache.delete(path)
    }
  }
}

const emptyCatalog = () => ({ playthroughs: [], ext: {} })

export async function loadCatalog() {
  await loadWorkspace()
  if (!binding.selected) return emptyCatalog()
  if (!cache.has(CATALOG)) {
    // A new workspace has no catalog yet: look before reading, so no request fails.
    const root = await workspace.list('')
    if (root.entries.some((e) => e.name === CATALOG && e.type === 'file')) await read(CATALOG)
    else cache.set(CATALOG, { doc: null, revision: null })
  }
  return cache.get(CATALOG).doc || emptyCatalog()
}

/** Read the catalog again after the server wrote it (a draft's row, its root session). */
export async function refreshCatalog() {
  cache.delete(CATALOG)
  await loadCatalog()
  if (channel) channel.postMessage({ path: CATALOG })
  notify()
}

function catalogDoc() {
  return (cache.get(CATALOG) && cache.get(CATALOG).doc) || emptyCatalog()
}

const tavern = (row) => (row.ext && row.ext.pmpDshTavern) || {}

export function playthroughs(characterId) {
  return catalogDoc().playthroughs.filter((p) => tavern(p).characterId === characterId)
}

export function playthrough(id) {
  return catalogDoc().playthroughs.find((p) => p.id === id) || null
}

/** The group run whose first session is `sessionId` (the group page's older addresses). */
export function groupRunStartedAt(sessionId) {
  return catalogDoc().playthroughs.find((p) => tavern(p).groupId && tavern(p).rootSessionId === sessionId) || null
}

export const characterIdOf = (row) => tavern(row).characterId
/** The group a group playthrough plays (docs/groups.md "Group playthroughs"), else null. */
export const groupOf = (row) => (row && tavern(row).groupId ? { id: tavern(row).groupId, name: tavern(row).groupName || '' } : null)
/** The card a run plays as `{id, name}` (a group run: its first member's, as the server wrote). */
export const characterOf = (row) => ({ id: tavern(row).characterId, name: tavern(row).characterName || '' })
export const numberOf = (row) => tavern(row).playthroughNumber || 1
export const isArchived = (row) => Boolean(tavern(row).archivedAt)
/** The opening draft a run was started from (docs/play.md "Opening drafts"), if any. */
export const draftIdOf = (row) => (row && tavern(row).draftId) || null
/** Whether a run is an opening draft that has no session yet. */
export const isUnstarted = (row) => Boolean(draftIdOf(row) && !tavern(row).rootSessionId)

export async function loadTimeline(id) {
  const row = playthrough(id) || ((await loadCatalog()) && playthrough(id))
  if (!row) return null
  return (cache.get(row.path) || (await read(row.path))).doc
}

export function timeline(id) {
  const row = playthrough(id)
  const entry = row && cache.get(row.path)
  return (entry && entry.doc) || { nodes: [] }
}

const pendingOf = (tl) => (tl.ext && tl.ext.innkeeperWebui && tl.ext.innkeeperWebui.pending) || null

/** The shown path: [{node, variant}] from the head variant back through parentVariantId. */
export function onPath(tl) {
  if (!tl.head) return []
  const owner = new Map()
  for (const node of tl.nodes) for (const v of node.variants) owner.set(v.id, { node, variant: v })
  const out = []
  let step = owner.get(tl.head.variantId) || null
  const seen = new Set()
  while (step && !seen.has(step.node.id)) {
    seen.add(step.node.id)
    out.unshift(step)
    step = step.node.parentVariantId ? owner.get(step.node.parentVariantId) : null
  }
  return out
}

/** The nodes on the shown path. */
export const path = (tl) => onPath(tl).map((step) => step.node)

/** The session the chat shows: a pending swipe's session, the head's, or the run's root. */
export function headSession(id) {
  const tl = timeline(id)
  const pending = pendingOf(tl)
  if (pending) return pending.sessionId
  return (tl.head && tl.head.sessionId) || tavern(playthrough(id) || {}).rootSessionId || null
}

// ------------------------------------------------------------------ catalog rows
async function nextNumber(characterId) {
  await loadCatalog()
  return Math.max(0, ...playthroughs(characterId).map(numberOf)) + 1
}

async function addRun({ character, sessionId, number, timelineDoc, group = null }) {
  const id = newId(group ? 'group' : 'playthrough')
  // A group's runs live beside the ones the server starts (groups/<id>/timeline.json).
  const parent = group ? 'groups' : character.id
  const dir = `${parent}/${id}`
  await workspace.mkdir(parent).catch((err) => { if (err.code !== 'PLAY_PATH_CONFLICT') throw err })
  await workspace.mkdir(dir)
  const file = `${dir}/timeline.json`
  await workspace.write(file, JSON.stringify(timelineDoc, null, 1), null, binding.workspaceScope)
  await update(CATALOG, (doc) => {
    if (doc.playthroughs.some((p) => p.id === id)) return
    const ext = { characterId: character.id, characterName: character.name.slice(0, 200), rootSessionId: sessionId, playthroughNumber: number }
    if (group) Object.assign(ext, { groupId: group.id, groupName: group.name.slice(0, 200) })
    doc.playthroughs.push({ id, path: file, lastOpenedAt: new Date().toISOString(), ext: { pmpDshTavern: ext } })
  }, emptyCatalog)
  await read(file)
  return id
}

/**
 * "New playthrough": an opening draft (`POST /v2/drafts`), no session until the first send. The
 * server writes the draft's catalog row and empty timeline; the client then numbers the row
 * ("Playthrough N") and drops the card-name title the server gives it (a title is a rename).
 * As docs/contract/play.md#lifecycle asks, a character's newest run that has not
 * started yet is reused instead of making another.
 */
export async function create(character) {
  await loadWorkspace()
  await loadCatalog()
  const unstarted = playthroughs(character.id).filter((row) => !isArchived(row) && isUnstarted(row)).at(-1)
  if (unstarted) return unstarted.id
  const number = await nextNumber(character.id)
  const made = await drafts.create({ characterId: character.id, source: 'webui', selection: { greetingIndex: 0 } })
  await afterFirstWrite()
  const id = made.draft.playthroughId
  cache.delete(CATALOG) // the server appended the row
  await updateRow(id, (row) => {
    const t = { ...tavern(row) }
    if (t.playthroughNumber) return
    t.playthroughNumber = number
    if (row.title === t.characterName) delete row.title
    row.ext = { ...(row.ext || {}), pmpDshTavern: t }
  })
  return id
}

/**
 * "New chat from template": a new run of `character` whose session starts from the template's
 * preset, persona, books and options. A template of another card (or of none) still makes a run
 * of this character: the card is bound again with the template's character options.
 */
export async function createFromTemplate(character, templateId) {
  await loadWorkspace()
  const number = await nextNumber(character.id)
  const { sessionId } = await playSessions.create({})
  await afterFirstWrite()
  const applied = await templates.applyTemplate(sessionId, templateId)
  const chosen = applied.selection || {}
  if (chosen.characterCardId !== character.id) {
    await selection.bindCharacter(sessionId, character.id, { greetingIndex: 0 })
  }
  return addRun({ character, sessionId, number, timelineDoc: { nodes: [] } })
}

/** "New chat with current settings": a new run whose session copies `sourceSessionId`'s selection. */
export async function createFrom(character, sourceSessionId) {
  await loadWorkspace()
  const number = await nextNumber(character.id)
  const { sessionId } = await playSessions.create({ selectionFromSessionId: sourceSessionId })
  await afterFirstWrite()
  return addRun({ character, sessionId, number, timelineDoc: { nodes: [] } })
}

/**
 * One-click archive: ask every active run of `characterId` whether it can open, then archive
 * the ones that cannot in one catalog write. Returns how many were archived.
 */
export async function archiveBroken(characterId) {
  const rows = playthroughs(characterId).filter((row) => !isArchived(row))
  const checks = await Promise.all(rows.map((row) => playthroughsApi.availability(row.id)))
  const broken = new Set(checks.filter((c) => c.status === 'invalid' || c.status === 'unavailable').map((c) => c.id))
  if (!broken.size) return 0
  const at = new Date().toISOString()
  await update(CATALOG, (doc) => {
    for (const row of doc.playthroughs) {
      if (!broken.has(row.id)) continue
      const t = { ...tavern(row) }
      t.archivedAt = t.archivedAt || at
      row.ext = { ...(row.ext || {}), pmpDshTavern: t }
    }
  }, emptyCatalog)
  return broken.size
}

async function updateRow(id, fn) {
  await update(CATALOG, (doc) => {
    const row = doc.playthroughs.find((p) => p.id === id)
    if (row) fn(row)
  }, emptyCatalog)
}

export function rename(id, name) {
  return updateRow(id, (row) => {
    if (name.trim()) row.title = name.trim()
    else delete row.title
  })
}

export function setArchived(id, archived) {
  return updateRow(id, (row) => {
    const t = { ...tavern(row) }
    if (archived) t.archivedAt = t.archivedAt || new Date().toISOString()
    else delete t.archivedAt
    row.ext = { ...(row.ext || {}), pmpDshTavern: t }
  })
}

export async function setGreeting(id, greetingIndex) {
  return selection.bindCharacter(headSession(id), characterIdOf(playthrough(id)), { greetingIndex })
}

// ------------------------------------------------------------------ turns and QA nodes
/**
 * The completed QA turns of a message list, in order: [{turn, user, reply}]. With `repliesAlone`
 * (a group chat) a reply asked for without the player's message is a turn too, its `user` null.
 */
export function qaTurns(messages, repliesAlone = false) {
  const byTurn = new Map()
  for (const m of messages) {
    if (m.turn === null || m.turn === undefined) continue
    if (!byTurn.has(m.turn)) byTurn.set(m.turn, { turn: m.turn, user: null, reply: null })
    const qa = byTurn.get(m.turn)
    if (m.role === 'user' && m.origin && m.origin.kind === 'user' && !qa.user) qa.user = m
    // The turn's reply is its last completed assistant message that calls no tools (the rule
    // MVU applies), so a tool step's intermediate reply never becomes the QA.
    if (m.role === 'assistant' && !m.incompleteTurn && !(m.toolCalls && m.toolCalls.length)) qa.reply = m
  }
  return [...byTurn.values()].filter((qa) => qa.reply && (qa.user || repliesAlone))
}

/** Where a QA starts: its player's message, or its reply when asked for without one. */
const startOf = (qa) => (qa.user || qa.reply).seq

/** Make the timeline agree with the shown session's completed QAs. */
export async function reconcile(id, messages) {
  const row = playthrough(id)
  const qas = qaTurns(messages, Boolean(groupOf(row)))
  const shown = headSession(id)
  const plan = (tl) => {
    const pending = pendingOf(tl)
    const on = onPath(tl)
    const ops = []
    if (pending && pending.sessionId === shown) {
      const qa = qas.find((q) => startOf(q) > pending.afterSeq)
      if (!qa) return ops
      ops.push({ kind: 'variant', nodeId: pending.nodeId, qa })
    }
    const last = ops.length ? ops[0].qa.reply.seq : (on.length ? on[on.length - 1].variant.endEventId : -1)
    for (const qa of qas) if (startOf(qa) > last) ops.push({ kind: 'node', qa })
    return ops
  }
  if (!plan(timeline(id)).length) return
  await update(row.path, (tl) => {
    const ops = plan(tl)
    if (!ops.length) return UNCHANGED // another tab recorded these QAs first
    for (const op of ops) {
      const variantId = newId('v')
      const variant = { id: variantId, sessionId: shown, startEventId: startOf(op.qa), endEventId: op.qa.reply.seq }
      if (op.kind === 'variant') {
        const node = tl.nodes.find((n) => n.id === op.nodeId)
        node.variants.push(variant)
        node.adoptedVariantId = variantId
        tl.head = { sessionId: shown, nodeId: node.id, variantId }
        delete tl.ext.innkeeperWebui.pending
      } else {
        const nodeId = newId('qa')
        tl.nodes.push({ id: nodeId, kind: 'qa', displayOverride: null,
          parentVariantId: tl.head ? tl.head.variantId : null, adoptedVariantId: variantId, variants: [variant] })
        tl.head = { sessionId: shown, nodeId, variantId }
      }
    }
  }, () => ({ nodes: [] }))
}

/** The seqs of a turn's turn/start and turn/end in a session's history (host route). */
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

function setPending(id, pending) {
  return update(playthrough(id).path, (tl) => {
    tl.ext = { ...(tl.ext || {}), innkeeperWebui: { ...((tl.ext && tl.ext.innkeeperWebui) || {}), pending } }
    if (!pending) delete tl.ext.innkeeperWebui.pending
  }, () => ({ nodes: [] }))
}

/**
 * A new reply variant of the last node on the path: branch before its turn, send again (a group
 * reply asked for without a message is asked for again; the branch keeps its speaker).
 */
export async function regenerate(id, qa) {
  const source = headSession(id)
  const node = path(timeline(id)).at(-1)
  const { start } = await turnBounds(source, qa.turn)
  if (start === undefined) throw new Error(`turn ${qa.turn} not found`)
  const { sessionId } = await playSessions.branch(source, {
    atEventId: start - 1, stateSource: { sessionId: source, beforeReplyEventId: qa.reply.seq },
  })
  await setPending(id, { kind: 'swipe', sessionId, nodeId: node.id, afterSeq: start - 1 })
  if (qa.user) await playSessions.send(sessionId, qa.user.text, newId('req'))
  else await groupPlay.reply(sessionId)
  return sessionId
}

/** Retry a request stopped before any reply: the same text on a branch before it. */
export async function retryStopped(id, stopped, text) {
  const source = headSession(id)
  const { sessionId } = await playSessions.branch(source, {
    atEventId: stopped.turnStartEventId - 1, stateSource: { sessionId: source, beforeUserEventId: stopped.userEventId },
  })
  const step = onPath(timeline(id)).at(-1)
  if (step) {
    await update(playthrough(id).path, (tl) => {
      if (pendingOf(tl)) delete tl.ext.innkeeperWebui.pending
      tl.head = { sessionId, nodeId: step.node.id, variantId: step.variant.id }
    }, () => ({ nodes: [] }))
  } else {
    await updateRow(id, (row) => { row.ext.pmpDshTavern.rootSessionId = sessionId })
  }
  await playSessions.send(sessionId, text, newId('req'))
}

/** Show another variant of the last node on the path. */
export function swipe(id, delta) {
  return update(playthrough(id).path, (tl) => {
    if (pendingOf(tl)) delete tl.ext.innkeeperWebui.pending
    const node = path(tl).at(-1)
    const n = tl.nodes.find((x) => x.id === node.id)
    const i = n.variants.findIndex((v) => v.id === n.adoptedVariantId)
    const next = n.variants[Math.min(n.variants.length - 1, Math.max(0, i + delta))]
    n.adoptedVariantId = next.id
    tl.head = { sessionId: next.sessionId, nodeId: n.id, variantId: next.id }
  }, () => ({ nodes: [] }))
}

export function setDisplayOverride(id, nodeId, text) {
  return update(playthrough(id).path, (tl) => {
    const n = tl.nodes.find((x) => x.id === nodeId)
    if (n) n.displayOverride = text
  }, () => ({ nodes: [] }))
}

async function branchAfter(id, turn) {
  const source = headSession(id)
  const { end } = await turnBounds(source, turn)
  if (end === undefined) throw new Error(`turn ${turn} has not ended`)
  return (await playSessions.branch(source, { atEventId: end })).sessionId
}

/** Go back to node `k` of the path in this run: a branch continues from there. */
export async function continueFrom(id, nodeIndex, turn) {
  const step = onPath(timeline(id))[nodeIndex]
  const sessionId = await branchAfter(id, turn)
  await update(playthrough(id).path, (tl) => {
    if (pendingOf(tl)) delete tl.ext.innkeeperWebui.pending
    tl.head = { sessionId, nodeId: step.node.id, variantId: step.variant.id }
  }, () => ({ nodes: [] }))
}

/** Branch at node `k` of the path into a new run of the same character (or group). */
export async function branch(id, nodeIndex, turn, character) {
  const sessionId = await branchAfter(id, turn)
  const nodes = onPath(timeline(id)).slice(0, nodeIndex + 1)
    .map(({ node, variant }) => ({ ...node, adoptedVariantId: variant.id, variants: [variant] }))
  const last = nodes[nodes.length - 1]
  const variantId = newId('v')
  nodes[nodes.length - 1] = { ...last, adoptedVariantId: variantId, variants: [{ ...last.variants[0], id: variantId, sessionId }] }
  const timelineDoc = { nodes, head: { sessionId, nodeId: last.id, variantId } }
  const group = groupOf(playthrough(id))
  return addRun({ character, sessionId, number: await nextNumber(character.id), timelineDoc, group })
}

/**
 * "Duplicate": a new run of the same character that continues from this one's last reply (a
 * branch of the whole shown path), titled "<title> (copy)". Later turns of either leave the
 * other alone: the copy writes to its own session.
 */
export async function duplicate(id, character, copyTitle) {
  const steps = onPath(timeline(id))
  if (!steps.length) throw new Error('nothing to duplicate yet: play a turn first')
  const messages = (await playSessions.messages(headSession(id))).messages
  const qas = qaTurns(messages)
  const last = qas[qas.length - 1]
  if (!last) throw new Error('nothing to duplicate yet: play a turn first')
  const copy = await branch(id, steps.length - 1, last.turn, character)
  await rename(copy, copyTitle)
  return copy
}

/** Append an imported chat's catalog row (`row.id` already there: nothing is written). */
export async function addImportedRun(row) {
  await loadWorkspace()
  await loadCatalog() // looks before reading: a new play folder has no catalog yet
  await update(CATALOG, (doc) => {
    if (doc.playthroughs.some((p) => p.id === row.id)) return UNCHANGED
    const number = Math.max(0, ...doc.playthroughs.filter((p) => tavern(p).characterId === tavern(row).characterId).map(numberOf)) + 1
    row.ext.pmpDshTavern.playthroughNumber = number
    doc.playthroughs.push(row)
  }, emptyCatalog)
  await read(row.path)
}

/** The workspace scope of the bound play folder (for writes made outside this module). */
export const workspaceScope = () => binding && binding.workspaceScope

// ------------------------------------------------------------------ deleting messages
/**
 * Delete node `nodeIndex` of the shown path and everything after it: the chat goes on from a
 * branch that ends where the node before it ended (or before the first turn). The log is
 * append-only, so nothing is erased: the returned `{head, rootSessionId}` puts the timeline back
 * (`restoreHead`) for an undo.
 */
export async function deleteFrom(id, nodeIndex, qas) {
  const source = headSession(id)
  const saved = { head: timeline(id).head || null, rootSessionId: tavern(playthrough(id)).rootSessionId || null }
  let sessionId
  if (nodeIndex > 0) {
    sessionId = await branchAfter(id, qas[nodeIndex - 1].reply.endTurn || qas[nodeIndex - 1].turn)
  } else {
    const { start } = await turnBounds(source, qas[0].turn)
    if (start === undefined) throw new Error(`turn ${qas[0].turn} not found`)
    sessionId = (await playSessions.branch(source, { atEventId: start - 1 })).sessionId
  }
  const step = nodeIndex > 0 ? onPath(timeline(id))[nodeIndex - 1] : null
  await update(playthrough(id).path, (tl) => {
    if (pendingOf(tl)) delete tl.ext.innkeeperWebui.pending
    if (step) tl.head = { sessionId, nodeId: step.node.id, variantId: step.variant.id }
    else delete tl.head
  }, () => ({ nodes: [] }))
  if (!step) await updateRow(id, (row) => { row.ext.pmpDshTavern.rootSessionId = sessionId })
  return saved
}

/** Undo `deleteFrom`: show the path (and root session) it saved again. */
export async function restoreHead(id, saved) {
  await update(playthrough(id).path, (tl) => {
    if (pendingOf(tl)) delete tl.ext.innkeeperWebui.pending
    if (saved.head) tl.head = saved.head
    else delete tl.head
  }, () => ({ nodes: [] }))
  if (saved.rootSessionId && saved.rootSessionId !== tavern(playthrough(id)).rootSessionId) {
    await updateRow(id, (row) => { row.ext.pmpDshTavern.rootSessionId = saved.rootSessionId })
  }
}
