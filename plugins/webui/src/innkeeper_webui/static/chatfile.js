// SillyTavern chat files (.jsonl) to and from playthroughs, in the browser, over the public
// routes — the same format and the same steps as `innkeeper import` / the chat export of
// docs/migration.md: a header line (user_name, character_name, create_date, chat_metadata), then
// one line per message (name, is_user, is_system, mes, swipes, swipe_id).
//
// Export: an imported run starts with its original file, verbatim; any other run with a header
// and the greeting it shows; then the shown path, each reply with the replies of all its
// variants as swipes. Import: a new session with the card (and the persona named by the chat,
// else the default), the original kept beside an import-context document of its QAs (what the
// model is given as the earlier story on the first turn), an empty timeline and a catalog row
// whose id comes from the file's hash (importing the same file again opens that run).

import { playSessions, selection, users, workspace } from './api.js'
import * as play from './play.js'

/** The workspace's file limit; pieces of the original stay well below it (JSON escaping). */
const MAX_FILE_BYTES = 1 << 20
const CHUNK_BYTES = 512 << 10
/** A chat file larger than this is refused before anything is written. */
export const MAX_CHAT_BYTES = 64 << 20
const NO_DATE = '1970-01-01@00h00m00s'
const bytes = (text) => new TextEncoder().encode(text).length

// ------------------------------------------------------------------ export
async function turnText(cache, variant) {
  if (!cache.has(variant.sessionId)) cache.set(variant.sessionId, playSessions.messages(variant.sessionId).then((r) => r.messages))
  const inside = (await cache.get(variant.sessionId)).filter((m) => m.seq >= variant.startEventId && m.seq <= variant.endEventId)
  const user = inside.find((m) => m.role === 'user')
  const replies = inside.filter((m) => m.role === 'assistant' && !m.incompleteTurn).map((m) => m.text || '')
  return { user: user ? user.text || '' : '', reply: replies.join('\n\n') }
}

/** The playthrough `id` as the text of a SillyTavern chat file. */
export async function exportChat(id, character, greetingIndex) {
  const row = play.playthrough(id)
  const t = row.ext.pmpDshTavern
  const characterName = t.characterName || character.name
  const head = play.headSession(id)
  const persona = head ? (await users.selection(head)).user : null
  const userName = persona ? persona.name : 'User'
  let text = ''
  const parts = row.ext.innkeeperImport && row.ext.innkeeperImport.originalParts
  if (Number.isInteger(parts) && parts > 0) {
    const base = row.path.split('/').slice(0, -1).join('/')
    for (let n = 1; n <= parts; n++) text += (await workspace.read(`${base}/original-${String(n).padStart(3, '0')}.jsonl`)).content
    if (text && !text.endsWith('\n')) text += '\n'
  } else {
    const lines = [{ user_name: userName, character_name: characterName, create_date: NO_DATE, chat_metadata: {} }]
    const greetings = [character.data.firstMessage, ...(character.data.alternateGreetings || [])]
    const index = Math.min(greetingIndex || 0, greetings.length - 1)
    if (greetings[index]) lines.push({ name: characterName, is_user: false, is_system: false, mes: greetings[index], swipes: greetings, swipe_id: index })
    text = lines.map((l) => JSON.stringify(l) + '\n').join('')
  }
  const cache = new Map()
  for (const { node, variant } of play.onPath(play.timeline(id))) {
    const chosen = await turnText(cache, variant)
    const swipes = []
    for (const v of node.variants) swipes.push(v === variant ? chosen.reply : (await turnText(cache, v)).reply)
    text += JSON.stringify({ name: userName, is_user: true, is_system: false, mes: chosen.user }) + '\n'
    text += JSON.stringify({ name: characterName, is_user: false, is_system: false, mes: chosen.reply, swipes, swipe_id: node.variants.indexOf(variant) }) + '\n'
  }
  return text
}

/** Offer `text` as a download named `name`. */
export function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/jsonl' }))
  const a = Object.assign(document.createElement('a'), { href: url, download: name })
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 1000)
}

// ------------------------------------------------------------------ import
/** Header, messages and the line numbers that were not JSON objects. */
export function parseChat(text) {
  const chat = { header: {}, messages: [], broken: [] }
  let first = true
  text.split(/\r?\n/).forEach((line, i) => {
    if (!line.trim()) return
    let doc = null
    try { doc = JSON.parse(line) } catch { doc = null }
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return chat.broken.push(i + 1)
    if (first && !('mes' in doc) && ('chat_metadata' in doc || 'user_name' in doc)) chat.header = doc
    else chat.messages.push(doc)
    first = false
  })
  return chat
}

const mes = (m) => (typeof m.mes === 'string' ? m.mes : '')

function alternatives(m) {
  if (!Array.isArray(m.swipes)) return []
  let skipped = false
  return m.swipes.filter((s, i) => {
    if (typeof s !== 'string') return false
    if (!skipped && (i === m.swipe_id || (!Number.isInteger(m.swipe_id) && s === mes(m)))) {
      skipped = true
      return false
    }
    return true
  })
}

/** The import-context document of a parsed chat (docs/play.md "Import context"). */
export function contextDocument(chat, chatName, originalParts) {
  const greeting = []
  const greetingSwipes = []
  const qa = []
  const system = []
  chat.messages.forEach((m, index) => {
    if (m.is_system === true) return system.push({ index, name: String(m.name ?? ''), text: mes(m) })
    if (m.is_user === true) return qa.push({ user: mes(m), assistant: '', messageIndex: index })
    if (!qa.length) {
      greeting.push(mes(m))
      greetingSwipes.push(...alternatives(m))
      return
    }
    const item = qa[qa.length - 1]
    item.assistant = item.assistant ? `${item.assistant}\n\n${mes(m)}` : mes(m)
    const alt = alternatives(m)
    if (alt.length) item.swipes = [...(item.swipes || []), ...alt]
    if (typeof m.send_date === 'string') item.sendDate = m.send_date
  })
  const h = chat.header
  const doc = {
    schemaVersion: 1,
    source: {
      kind: 'sillytavern-chat', chatName, createDate: h.create_date ?? null, userName: h.user_name ?? null,
      characterName: h.character_name ?? null, messageCount: chat.messages.length, systemMessages: system,
      greetingSwipes, brokenLines: chat.broken, originalParts, omittedQa: 0,
    },
    qa,
  }
  if (greeting.length) doc.greeting = greeting.join('\n\n')
  return doc
}

/** `doc` as JSON within the workspace file limit: the oldest QAs go first (counted). */
function encodeContext(doc) {
  let text = JSON.stringify(doc)
  let dropped = 0
  while (bytes(text) > MAX_FILE_BYTES && dropped < doc.qa.length) {
    dropped = Math.max(dropped + 1, Math.ceil(dropped * 1.25))
    text = JSON.stringify({ ...doc, qa: doc.qa.slice(dropped), source: { ...doc.source, omittedQa: dropped, systemMessages: [], greetingSwipes: [] } })
  }
  return text
}

function splitOriginal(text) {
  const parts = []
  let current = ''
  for (const line of text.split(/(?<=\n)/)) {
    if (current && bytes(current) + bytes(line) > CHUNK_BYTES) {
      parts.push(current)
      current = ''
    }
    let rest = line
    while (bytes(rest) > CHUNK_BYTES) {
      parts.push(rest.slice(0, CHUNK_BYTES / 4))
      rest = rest.slice(CHUNK_BYTES / 4)
    }
    current += rest
  }
  if (current) parts.push(current)
  return parts.length ? parts : ['']
}

async function sha256(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('')
}

const segment = (name) => {
  const cleaned = name.replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^[._-]+|[._-]+$/g, '').slice(0, 80)
  return cleaned && /^[A-Za-z0-9]/.test(cleaned) ? cleaned : `c${cleaned}`.slice(0, 80) || 'character'
}

/**
 * Import the chat file `file` as a new playthrough of `character`; returns its id. A file that
 * is no chat (no message, or not UTF-8 JSON lines) is refused before anything is written.
 */
export async function importChat(file, character) {
  if (file.size > MAX_CHAT_BYTES) throw new Error(`${file.name} is larger than ${MAX_CHAT_BYTES >> 20} MiB`)
  const text = await file.text()
  const chat = parseChat(text)
  if (!chat.messages.length) throw new Error(`${file.name} is not a SillyTavern chat file (no message line)`)
  const hash = await sha256(text)
  const id = `import-${hash.slice(0, 24)}`
  await play.loadCatalog()
  if (play.playthrough(id)) return id // imported before: open that run
  const chatName = file.name.replace(/\.jsonl$/i, '')
  const title = chatName.slice(0, 200)
  const { sessionId } = await playSessions.create({ title })
  await play.loadWorkspace(true) // the first write binds the default play folder
  await selection.bindCharacter(sessionId, character.id, { greetingIndex: 0 })
  const named = String(chat.header.user_name || '')
  const persona = named ? (await users.list()).users.find((u) => u.name === named) : null
  if (persona) await users.select(sessionId, persona.id)
  const base = `${segment(character.id)}/${id}`
  const scope = play.workspaceScope()
  await workspace.mkdir(segment(character.id)).catch((err) => { if (err.code !== 'PLAY_PATH_CONFLICT') throw err })
  await workspace.mkdir(base).catch((err) => { if (err.code !== 'PLAY_PATH_CONFLICT') throw err })
  const original = splitOriginal(text)
  for (let n = 0; n < original.length; n++) {
    await workspace.write(`${base}/original-${String(n + 1).padStart(3, '0')}.jsonl`, original[n], undefined, scope)
  }
  const contextPath = `${base}/import-context.json`
  await workspace.write(contextPath, encodeContext(contextDocument(chat, chatName, original.length)), undefined, scope)
  await workspace.write(`${base}/timeline.json`, JSON.stringify({ nodes: [] }), null, scope)
  await playSessions.bindImportContext(sessionId, contextPath)
  await play.addImportedRun({
    id, path: `${base}/timeline.json`, title, lastOpenedAt: new Date().toISOString(),
    ext: {
      pmpDshTavern: { characterId: character.id, characterName: character.name.slice(0, 200), rootSessionId: sessionId, importContextPath: contextPath },
      innkeeperImport: { source: file.name, originalParts: original.length },
    },
  })
  return id
}

/** The imported QAs of a run (its import context), for showing them above the live chat. */
export async function importedTurns(row) {
  const path = row && row.ext && row.ext.pmpDshTavern && row.ext.pmpDshTavern.importContextPath
  if (!path) return null
  const doc = JSON.parse((await workspace.read(path)).content)
  return { greeting: typeof doc.greeting === 'string' ? doc.greeting : '', qa: Array.isArray(doc.qa) ? doc.qa : [] }
}
