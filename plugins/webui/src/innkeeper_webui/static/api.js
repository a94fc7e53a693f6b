// Every request the client makes goes through this module: the public Tavern v1/v2/v3 routes,
// the host's session routes and its event stream. Nothing else talks to the server, so moving a
// feature from one API version to another is a change here.

const V1 = '/pmp-dsh-tavern/api/v1'
const V2 = '/pmp-dsh-tavern/api/v2'
const V3 = '/pmp-dsh-tavern/api/v3'
const HOST = '/host/api'

/** A failed request: the server's message and stable code, or a network failure. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message)
    this.status = status
    this.code = code
    this.details = details
  }
}

const enc = encodeURIComponent

/** Reconnect delays after a lost event stream: doubling from this, capped at `RETRY_MAX_MS`. */
export const RETRY_FIRST_MS = 250
export const RETRY_MAX_MS = 8000

/**
 * Follow a server-sent event stream and reconnect explicitly when it is lost: the browser's own
 * EventSource retry gives up on an HTTP error and cannot resume from a seq of ours. After a loss
 * the stream is reopened with `?after=<last durable seq seen>` (when `resume` is set) after a
 * back-off (250 ms doubling to 8 s, reset by a successful open), and (with `resume`) durable
 * events at or below that seq are dropped, so nothing is applied twice. `onOpen(reconnected)`
 * runs on every open: `reconnected` is true after a loss, when the caller re-reads what it shows
 * (events without an id, like streamed reply text, are not replayed). `onLost()` runs once per
 * loss. Returns a function that closes the stream for good.
 */
// A page put in the back/forward cache keeps its EventSources open, and Chromium allows six
// connections per host: a few such pages (or tabs) starve every other request of the origin. So
// every stream closes when the page is hidden that way and reopens, as after a loss, when it is
// shown again. A tab in the background (`document.visibilityState` hidden) closes its streams
// too, after `HIDDEN_GRACE_MS` (so switching away and back briefly does not churn) and, for a
// stream whose caller is `busy()` (a reply streaming in), only once that ends.
/** How long a hidden tab keeps its streams open before closing them. */
export const HIDDEN_GRACE_MS = 2000
const followers = new Set()
window.addEventListener('pagehide', () => {
  for (const follower of followers) follower.suspend()
})
window.addEventListener('pageshow', (ev) => {
  if (ev.persisted) for (const follower of followers) follower.resume()
})
document.addEventListener('visibilitychange', () => {
  const hidden = document.visibilityState === 'hidden'
  for (const follower of followers) {
    if (hidden) follower.hide()
    else follower.resume()
  }
})

function followEvents(url, types, { onEvent, onOpen, onLost, busy = () => false, after = null, resume = false }) {
  let source = null
  let graceTimer = null
  let closeWhenIdle = false // hidden past the grace while busy: close once the caller is idle
  let lastSeq = after
  let delay = RETRY_FIRST_MS
  let lost = false
  let timer = null
  let closed = false

  function open() {
    timer = null
    const query = resume && lastSeq !== null && lastSeq !== undefined ? `?after=${lastSeq}` : ''
    const es = new EventSource(url + query)
    source = es
    es.addEventListener('open', () => {
      if (source !== es) return
      delay = RETRY_FIRST_MS
      const reconnected = lost
      lost = false
      if (onOpen) onOpen(reconnected)
    })
    es.addEventListener('error', () => {
      if (closed || source !== es) return // a stream closed on purpose (pagehide) stays closed
      es.close()
      if (!lost) {
        lost = true
        if (onLost) onLost()
      }
      timer = setTimeout(open, delay)
      delay = Math.min(delay * 2, RETRY_MAX_MS)
    })
    for (const type of types) {
      es.addEventListener(type, (ev) => {
        if (source !== es) return
        let data = null
        try {
          data = JSON.parse(ev.data)
        } catch {
          return // a malformed event is ignored
        }
        // A durable event carries its seq in the body. (`ev.lastEventId` is no test: the browser
        // keeps the last id it saw and hands it to the id-less live events too.)
        const seq = data && typeof data.seq === 'number' ? data.seq : null
        if (resume && seq !== null) {
          if (lastSeq !== null && seq <= lastSeq) return // already seen
          lastSeq = seq
        }
        onEvent(type, data, seq)
        if (closeWhenIdle && !busy()) follower.suspend()
      })
    }
  }

  const follower = {
    suspend() {
      clearTimeout(timer)
      clearTimeout(graceTimer)
      timer = null
      graceTimer = null
      closeWhenIdle = false
      if (source) source.close()
      source = null
      lost = true // reopened later: the caller re-reads what it shows
    },
    /** The page went to the background: close after the grace, or once idle if busy then. */
    hide() {
      if (graceTimer || closeWhenIdle) return
      graceTimer = setTimeout(() => {
        graceTimer = null
        if (document.visibilityState !== 'hidden') return
        if (busy()) closeWhenIdle = true
        else follower.suspend()
      }, HIDDEN_GRACE_MS)
    },
    resume() {
      clearTimeout(graceTimer)
      graceTimer = null
      closeWhenIdle = false
      if (!closed && !source && !timer) open()
    },
  }
  followers.add(follower)
  open()
  if (document.visibilityState === 'hidden') follower.hide()
  return () => {
    closed = true
    followers.delete(follower)
    clearTimeout(timer)
    clearTimeout(graceTimer)
    if (source) source.close()
  }
}

async function call(method, path, { json, body, type, query } = {}) {
  let url = path
  if (query) {
    const params = new URLSearchParams()
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, v)
    const qs = params.toString()
    if (qs) url += '?' + qs
  }
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } }
  if (json !== undefined) {
    init.body = JSON.stringify(json)
    init.headers['Content-Type'] = 'application/json'
  } else if (body !== undefined) {
    init.body = body
    if (type) init.headers['Content-Type'] = type
  }
  let response
  try {
    response = await fetch(url, init)
  } catch (err) {
    throw new ApiError(0, 'NETWORK_ERROR', String(err && err.message ? err.message : err))
  }
  let data = null
  const text = await response.text()
  try {
    data = text ? JSON.parse(text) : null
  } catch {
    data = null
  }
  if (!response.ok || (data && data.ok === false)) {
    throw new ApiError(
      response.status,
      (data && data.code) || `HTTP_${response.status}`,
      (data && (typeof data.error === 'object' && data.error ? data.error.message : data.error)) || response.statusText || 'request failed',
      data,
    )
  }
  return data
}

// ------------------------------------------------------------------ library (v1)
export const characters = {
  list: () => call('GET', `${V1}/characters`),
  get: (id) => call('GET', `${V1}/characters/${enc(id)}`),
  regexScripts: (id) => call('GET', `${V1}/characters/${enc(id)}/regex-scripts`),
  /** The card's avatar as a WebP thumbnail fitted into `size` px (96, 192 or 384). */
  thumbnailUrl: (id, size = 192) => `${V1}/characters/${enc(id)}/thumbnail?size=${size}`,
  exportJsonUrl: (id) => `${V1}/characters/${enc(id)}/json`,
  exportPngUrl: (id) => `${V1}/characters/${enc(id)}/png`,
  /** A new card from camelCase fields (`name` required). */
  create: (fields) => call('POST', `${V1}/characters`, { json: fields }),
  /** Edit fields; with `expectedRevision` a card changed since is 409 RESOURCE_REVISION_CONFLICT. */
  update: (id, fields, expectedRevision) =>
    call('PATCH', `${V1}/characters/${enc(id)}`, { json: expectedRevision ? { ...fields, expectedRevision } : fields }),
  /** Replace the card's picture (PNG/JPEG/WebP bytes; the server crops it to 2:3). */
  setAvatar: (id, bytes, type, expectedRevision) =>
    call('PUT', `${V1}/characters/${enc(id)}/avatar`, { body: bytes, type, query: { expectedRevision } }),
  worldBooks: (id) => call('GET', `${V1}/characters/${enc(id)}/world-books`),
  setWorldBooks: (id, worldBookIds) => call('PUT', `${V1}/characters/${enc(id)}/world-books`, { json: { worldBookIds } }),
  importFile: (file, bytes, type) =>
    call('POST', `${V1}/characters/import`, { body: bytes, type, query: { filename: file.name } }),
  order: (mode, characterIds) =>
    call('PUT', `${V1}/characters/order`, { json: characterIds ? { mode, characterIds } : { mode } }),
  relink: (previousCharacterId, characterId) =>
    call('POST', `${V1}/characters/relink`, { json: { previousCharacterId, characterId } }),
}

/** Groups of library characters (Tavern v1; docs/resources.md "Groups"). */
export const groups = {
  list: () => call('GET', `${V1}/groups`),
  create: (body) => call('POST', `${V1}/groups`, { json: body }),
  update: (id, body) => call('PATCH', `${V1}/groups/${enc(id)}`, { json: body }),
  remove: (id, revision) => call('DELETE', `${V1}/groups/${enc(id)}`, { query: { revision } }),
}

/** The bundled UI's settings on the server (Tavern v1; docs/webui.md "Settings routes"). */
export const uiSettings = {
  get: () => call('GET', `${V1}/ui-settings`),
  save: (settings) => call('PUT', `${V1}/ui-settings`, { json: settings }),
  reset: () => call('DELETE', `${V1}/ui-settings`),
  conversation: () => call('GET', `${V1}/conversation-settings`),
  saveConversation: (settings) => call('PUT', `${V1}/conversation-settings`, { json: settings }),
}

export const presets = {
  list: (sessionId) => call('GET', `${V1}/presets`, { query: { sessionId } }),
  importText: (content, name) => call('POST', `${V1}/import`, { json: { content, name } }),
  exportUrl: (id) => `${V1}/presets/${enc(id)}/export`,
  get: (id) => call('GET', `${V1}/presets/${enc(id)}`),
  /** Edit (docs/resources.md "Preset editing"); with `expectedRevision` a preset changed since is 409. */
  update: (id, edit, expectedRevision) =>
    call('PUT', `${V1}/presets/${enc(id)}`, { json: expectedRevision ? { ...edit, expectedRevision } : edit }),
  remove: (id) => call('DELETE', `${V1}/presets/${enc(id)}`),
  /** The preset's SillyTavern document, as its export writes it. */
  exportText: async (id) => {
    const response = await fetch(`${V1}/presets/${enc(id)}/export`, { credentials: 'same-origin' })
    if (!response.ok) throw new ApiError(response.status, `HTTP_${response.status}`, response.statusText || 'export failed')
    return response.text()
  },
  /** What each sampler becomes against the provider, for the stored preset with `sampling` applied. */
  admission: (presetId, sampling) => call('POST', `${V1}/preset-admission`, { json: { presetId, sampling } }),
  regexScripts: (id) => call('GET', `${V1}/presets/${enc(id)}/regex-scripts`),
  select: (id, sessionId) => call('POST', `${V1}/select`, { json: sessionId ? { id, sessionId } : { id } }),
}

export const worldBooks = {
  list: () => call('GET', `${V1}/world-books`),
  get: (id) => call('GET', `${V1}/world-books/${enc(id)}`),
  create: (name) => call('POST', `${V1}/world-books`, { json: { name } }),
  /** One entry under the book's revision (its `updatedAt`; docs/resources.md). */
  putEntry: (id, uid, entry, expectedRevision) =>
    call('PUT', `${V1}/world-books/${enc(id)}/entries/${enc(String(uid))}`, { json: { entry, expectedRevision } }),
  deleteEntry: (id, uid, expectedRevision) =>
    call('DELETE', `${V1}/world-books/${enc(id)}/entries/${enc(String(uid))}`, { query: { expectedRevision } }),
  /** Which entries `text` fires, and why (a dry run). */
  testActivation: (id, text) => call('POST', `${V1}/world-books/${enc(id)}/test-activation`, { json: { text } }),
  importText: (text, filename) =>
    call('POST', `${V1}/world-books/import`, { body: text, type: 'application/json', query: { filename } }),
  exportUrl: (id) => `${V1}/world-books/${enc(id)}/json`,
  selection: (sessionId) => call('GET', `${V1}/world-book-selection`, { query: { sessionId } }),
  select: (sessionId, worldBookIds) =>
    call('POST', `${V1}/world-book-selection`, { json: { sessionId, worldBookIds } }),
}

export const users = {
  list: () => call('GET', `${V1}/users`),
  importText: (text) => call('POST', `${V1}/users/import`, { body: text, type: 'application/json' }),
  exportUrl: (id) => `${V1}/users/${enc(id)}/export`,
  selection: (sessionId) => call('GET', `${V1}/user-selection`, { query: { sessionId } }),
  select: (sessionId, userId) => call('POST', `${V1}/user-selection`, { json: { sessionId, userId } }),
  get: (id) => call('GET', `${V1}/users/${enc(id)}`),
  create: (fields) => call('POST', `${V1}/users`, { json: fields }),
  update: (id, fields) => call('PATCH', `${V1}/users/${enc(id)}`, { json: fields }),
  /** The global default persona of new sessions (`{selection: {userId} | null, user}`). */
  defaultOne: () => call('GET', `${V1}/user-selection`),
  setDefault: (userId) => call('POST', `${V1}/user-selection`, { json: { userId } }),
  worldBooks: (id) => call('GET', `${V1}/users/${enc(id)}/world-books`),
  setWorldBooks: (id, worldBookIds) => call('PUT', `${V1}/users/${enc(id)}/world-books`, { json: { worldBookIds } }),
}

/** Session templates (docs/prompt-assembly.md "Session templates"). */
export const templates = {
  list: () => call('GET', `${V1}/session-templates`),
  /** Save what `sourceSessionId` has (or would freeze) as a new template; it becomes selected. */
  saveFrom: (name, sourceSessionId) => call('POST', `${V1}/session-templates`, { json: { name, sourceSessionId } }),
  select: (id) => call('POST', `${V1}/session-templates/select`, { json: { id } }),
  exportUrl: (id) => `${V1}/session-templates/${enc(id)}/export`,
  importText: (text) =>
    call('POST', `${V1}/session-templates/import`, { body: text, type: 'application/json' }),
  /** Replace `targetSessionId`'s selection with the template's. */
  applyTemplate: (targetSessionId, templateId) =>
    call('POST', `${V1}/session-configurations/apply`, {
      json: { targetSessionId, source: { mode: 'template', templateId } },
    }),
}

export const selection = {
  character: (sessionId) => call('GET', `${V1}/character-selection`, { query: { sessionId } }),
  bindCharacter: (sessionId, characterCardId, character) =>
    call('POST', `${V1}/character-selection`, { json: { sessionId, characterCardId, character } }),
}

// ------------------------------------------------------------------ play workspace (v2)
export const workspace = {
  get: () => call('GET', `${V2}/workspace`),
  bind: (path) => call('PUT', `${V2}/workspace`, { json: { path } }),
  mkdir: (path) => call('POST', `${V2}/workspace/dirs`, { json: { path } }),
  read: (path) => call('GET', `${V2}/workspace/files`, { query: { path } }),
  list: (path) => call('GET', `${V2}/workspace/files`, { query: { list: path } }),
  previous: () => call('GET', `${V2}/workspace/previous`),
  /** Write a file; managed documents need `expectedRevision` (null = create only). */
  write: (path, content, expectedRevision, expectedWorkspaceScope) =>
    call('PUT', `${V2}/workspace/files`, {
      query: { path },
      json: { content, expectedRevision, ...(expectedWorkspaceScope ? { expectedWorkspaceScope } : {}) },
    }),
}

/** How often the orb re-reads `/v2/chrome` while the page is visible (spec: 1-second polling). */
export const CHROME_POLL_MS = 1000

/** The frontend display mode ("chrome orb"): native DSH or the play frontend. */
export const chrome = {
  get: () => call('GET', `${V2}/chrome`),
  set: (mode) => call('PUT', `${V2}/chrome`, { json: { mode } }),
  /**
   * `onChange({mode, revision})` once read and after every change (made here or by another tab
   * or client). The spec's internal transport, not an event stream: a stream per tab would hold
   * one of the six connections Chromium allows per host for as long as the tab is open, so a few
   * tabs would stall every request of the origin. Instead: a first GET, a read-back when the
   * window gets focus or the page becomes visible again, and a GET every second while it is
   * visible (none while hidden or in the back/forward cache). Each GET sends the last ETag, so an
   * unchanged mode is an empty 304; polling and focus share an unfinished read, so a slow network
   * never piles requests up. A failed read keeps the mode shown and is tried again on the next
   * tick. Returns a function that stops watching.
   */
  watch(onChange) {
    let etag = null
    let last = null
    let pending = null
    let timer = null
    let stopped = false

    async function read() {
      const headers = { Accept: 'application/json' }
      if (etag) headers['If-None-Match'] = etag
      const response = await fetch(`${V2}/chrome`, { credentials: 'same-origin', cache: 'no-store', headers })
      if (response.status === 304 || !response.ok) return
      const data = await response.json()
      etag = response.headers.get('ETag')
      if (stopped || (last && last.mode === data.mode && last.revision === data.revision)) return
      last = { mode: data.mode, revision: data.revision }
      onChange(last)
    }
    function refresh() {
      if (stopped || pending) return
      pending = read()
        .catch(() => {}) // the server is away: keep what is shown, ask again on the next tick
        .finally(() => { pending = null })
    }
    function start() {
      if (!stopped && !timer && document.visibilityState === 'visible') {
        timer = setInterval(refresh, CHROME_POLL_MS)
      }
    }
    function pause() {
      clearInterval(timer)
      timer = null
    }
    function onVisibility() {
      if (document.visibilityState === 'visible') {
        refresh()
        start()
      } else {
        pause()
      }
    }
    function onShow(ev) {
      if (ev.persisted) onVisibility()
    }
    document.addEventListener('visibilitychange', onVisibility)
    window.addEventListener('focus', refresh)
    window.addEventListener('pagehide', pause)
    window.addEventListener('pageshow', onShow)
    refresh()
    start()
    return () => {
      stopped = true
      pause()
      document.removeEventListener('visibilitychange', onVisibility)
      window.removeEventListener('focus', refresh)
      window.removeEventListener('pagehide', pause)
      window.removeEventListener('pageshow', onShow)
    }
  },
}

export const playthroughsApi = {
  availability: (id) => call('GET', `${V2}/playthroughs/${enc(id)}/availability`),
}

/** Opening drafts: a new playthrough's greeting and variables before its first send. */
export const drafts = {
  create: (body) => call('POST', `${V2}/drafts`, { json: body }),
  get: (id) => call('GET', `${V2}/drafts/${enc(id)}`),
  /** `body` carries `expectedRevision` (the draft's integer revision read). */
  update: (id, body) => call('PUT', `${V2}/drafts/${enc(id)}`, { json: body }),
  /** Reserve the session of the first send: `{sessionId, requestId, accepted}`; sends nothing. */
  materialize: (id, expectedRevision, operationId, text) =>
    call('POST', `${V2}/drafts/${enc(id)}/materialize`, { json: { expectedRevision, operationId, text } }),
  cancel: (id) => call('POST', `${V2}/drafts/${enc(id)}/cancel`, { json: {} }),
}

export const playSessions = {
  create: (body) => call('POST', `${V2}/sessions`, { json: body }),
  branch: (id, body) => call('POST', `${V2}/sessions/${enc(id)}/branch`, { json: body }),
  send: (id, text, requestId) =>
    call('POST', `${V2}/sessions/${enc(id)}/user-message`, { json: { text, requestId } }),
  /** Bind a workspace file (an import-context document) to an empty session. */
  bindImportContext: (id, path) =>
    call('PUT', `${V2}/sessions/${enc(id)}/import-context`, { json: { reference: { path } } }),
  /** The session's messages without the bodies a chat hides (system prompts, context). */
  messages: (id) => call('GET', `${V2}/sessions/${enc(id)}/messages`, { query: { bodies: 'display' } }),
  /** A turn extending the last reply (docs/sessions.md "Turn kinds"): `{turn}` once started. */
  continueReply: (id) => call('POST', `${V2}/sessions/${enc(id)}/continue`, { json: {} }),
  /** The model writes the player's next message: `{turn, text, reason}` once it ends. */
  impersonate: (id) => call('POST', `${V2}/sessions/${enc(id)}/impersonate`, { json: {} }),
}

// ------------------------------------------------------------------ group play (v2)
/** Group playthroughs (docs/groups.md "Group playthroughs"). */
export const groupPlay = {
  start: (groupId) => call('POST', `${V2}/groups/${enc(groupId)}/playthroughs`, { json: {} }),
  state: (id) => call('GET', `${V2}/sessions/${enc(id)}/group`),
  /** "Next speaker" (no `speakerId`: the strategy's) or "Let X speak": a reply without input. */
  reply: (id, speakerId) =>
    call('POST', `${V2}/sessions/${enc(id)}/group/reply`, { json: speakerId ? { speakerId } : {} }),
  /** Who answers the player's next message. */
  nextSpeaker: (id, speakerId) =>
    call('POST', `${V2}/sessions/${enc(id)}/group/next-speaker`, { json: { speakerId } }),
  stop: (id) => call('POST', `${V2}/sessions/${enc(id)}/group/stop`, { json: {} }),
}

// ------------------------------------------------------------------ why (v1 /active, v3)
export const audit = {
  active: (sessionId) => call('GET', `${V1}/active`, { query: { sessionId } }),
  assemblies: (sessionId) => call('GET', `${V3}/sessions/${enc(sessionId)}/assemblies`),
  assembly: (sessionId, recordId) =>
    call('GET', `${V3}/sessions/${enc(sessionId)}/assemblies/${enc(recordId)}`),
}

// ------------------------------------------------------------------ MVU variables (v1)
const scopeQuery = (scope) => JSON.stringify(scope)
export const mvu = {
  resources: (scope) => call('GET', `${V1}/mvu/resources`, { query: { scope: scopeQuery(scope) } }),
  resource: (id, scope) => call('GET', `${V1}/mvu/resource`, { query: { id, scope: scopeQuery(scope) } }),
  snapshot: (scope) => call('GET', `${V1}/mvu/snapshot`, { query: { scope: scopeQuery(scope) } }),
  update: (body) => call('POST', `${V1}/mvu/update`, { json: body }),
}

// ------------------------------------------------------------------ host sessions
export const sessions = {
  create: (title) => call('POST', `${HOST}/sessions`, { json: title ? { title } : {} }),
  inspect: (id) => call('GET', `${HOST}/sessions/${enc(id)}`),
  rename: (id, title) => call('PATCH', `${HOST}/sessions/${enc(id)}`, { json: { title } }),
  fork: (id, atEventId) => call('POST', `${HOST}/sessions/${enc(id)}/fork`, { json: { atEventId } }),
  messages: (id) => call('GET', `${HOST}/sessions/${enc(id)}/messages`),
  history: (id, query) => call('GET', `${HOST}/sessions/${enc(id)}/history`, { query }),
  prompt: (id, text) => call('POST', `${HOST}/sessions/${enc(id)}/prompt`, { json: { text } }),
  cancel: (id) => call('POST', `${HOST}/sessions/${enc(id)}/cancel`),
  /**
   * Follow the session's event stream from `after` (a seq). `onEvent(type, data, seq)` gets
   * durable events and `assistant/partial` deltas. A lost connection is retried with back-off
   * and resumed after the last durable seq seen; `onOpen(reconnected)` / `onLost()` as in
   * `followEvents`; `busy()` (a reply streaming in) keeps a hidden tab's stream open until the
   * turn ends. Returns a function that closes it.
   */
  stream(id, after, onEvent, { onOpen, onLost, busy } = {}) {
    const types = ['assistant/partial', 'assistant/message', 'turn/start', 'turn/end', 'user/message', 'request/error']
    return followEvents(`${HOST}/sessions/${enc(id)}/events`, types, {
      onEvent, onOpen, onLost, busy, after: after || null, resume: true,
    })
  },
}

// ------------------------------------------------------------------ host model settings
/** The model connection (docs/http.md "Model settings"): the key is sent, never read back. */
export const modelSettings = {
  get: () => call('GET', `${HOST}/model-settings`),
  save: (body) => call('PUT', `${HOST}/model-settings`, { json: body }),
  test: (body) => call('POST', `${HOST}/model-settings/test`, { json: body }),
}

// ------------------------------------------------------------------ this plugin
/** The bundled example card's bytes (imported like a file the player picked). */
export const EXAMPLE_CARD = 'example-character.json'
export async function exampleCard() {
  let response
  try {
    response = await fetch(`/webui/examples/${EXAMPLE_CARD}`, { credentials: 'same-origin' })
  } catch (err) {
    throw new ApiError(0, 'NETWORK_ERROR', String(err && err.message ? err.message : err))
  }
  if (!response.ok) throw new ApiError(response.status, `HTTP_${response.status}`, response.statusText)
  return new Uint8Array(await response.arrayBuffer())
}

/** Render chat Markdown to sanitized HTML on the server (markdown-it-py + nh3). */
export const render = (texts) => call('POST', '/webui/api/render', { json: { texts } })

// ------------------------------------------------------------------ card scripts (v1)
/** Card-script execution (docs/mvu.md "Card execution"): grants, bindings, writes. */
export const cardExecution = {
  grant: (body) => call('POST', `${V1}/rendering-write-grants`, { json: body }),
  dropGrant: (grantId) => call('DELETE', `${V1}/rendering-write-grants/${enc(grantId)}`),
  bind: (body) => call('POST', `${V1}/mvu/card-binding`, { json: body }),
  write: (body) => call('POST', `${V1}/mvu/card-write`, { json: body }),
  revoke: (body) => call('POST', `${V1}/mvu/card-binding/revoke`, { json: body }),
}
