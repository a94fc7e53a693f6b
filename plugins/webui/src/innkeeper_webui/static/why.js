// The Why panel: for any past round (v3 assembly records, verified against durable history) or
// the next request (v1 /active preview): which lore fired or was rejected and why, the sections
// and parameters actually sent.

import { h, mount } from './core.js'
import { t } from './i18n.js'
import { audit, sessions } from './api.js'
import { attempt, labelledSelect } from './ui.js'
import { variablesTable } from './mvu.js'

const NOW = '__next__'
/** Ancestors whose inherited rounds are listed (a swipe or branch is a fork of a fork…). */
const MAX_ANCESTORS = 8

/**
 * The rounds behind what the session shows: its own records, and its ancestors' records of the
 * history it inherited (a fork shares its parent's seqs up to `atEventId`). Newest first.
 */
async function roundsOf(sessionId) {
  const rounds = []
  let sid = sessionId
  let limit = Infinity
  for (let depth = 0; sid && depth <= MAX_ANCESTORS; depth++) {
    const [list, info] = await Promise.all([audit.assemblies(sid), sessions.inspect(sid)])
    for (const r of list.assemblies || []) {
      const seq = r.references && r.references.systemSeq
      if (depth === 0 || (seq !== null && seq !== undefined && seq <= limit)) rounds.push({ ...r, sessionId: sid, seq: seq ?? 0 })
    }
    const parent = info.header && info.header.parent
    if (!parent) break
    limit = Math.min(limit, parent.atEventId)
    sid = parent.sessionId
  }
  return rounds.sort((a, b) => b.seq - a.seq)
}

function loreTable(lore) {
  const rows = []
  for (const book of (lore && lore.books) || []) {
    const bookName = (book.resource && (book.resource.name || book.resource.id)) || ''
    for (const d of book.decisions || []) {
      const fired = d.decision === 'included'
      rows.push(h('tr', { class: fired ? 'fired' : 'rejected' },
        h('td', {}, bookName),
        h('td', {}, d.entryName || d.loreId),
        h('td', {}, fired ? t('fired') : t('rejected')),
        h('td', {}, d.reason || '')))
    }
  }
  if (!rows.length) return h('p', { class: 'muted' }, '—')
  return h('table', { 'aria-label': t('lore') },
    h('thead', {}, h('tr', {}, h('th', {}, t('book')), h('th', {}, t('entry')), h('th', {}, t('result')), h('th', {}, t('reason')))),
    h('tbody', {}, rows))
}

function sectionsList(sections) {
  if (!sections || !sections.length) return null
  return h('div', {}, h('h3', {}, t('sections')),
    h('ul', { class: 'plain' }, sections.map((s) =>
      h('li', {}, `${s.name || s.identifier} · ${s.role || ''} · ${s.bytes} B`, s.status ? ` · ${s.status}` : ''))))
}

function parameters(params) {
  if (!params) return null
  const effective = params.effective || params.proposed || {}
  const entries = Object.entries(effective).filter(([, v]) => v !== null && v !== undefined)
  return h('div', {}, h('h3', {}, t('parameters')),
    entries.length ? h('dl', { class: 'params' }, entries.map(([k, v]) => [h('dt', {}, k), h('dd', {}, JSON.stringify(v))])) : h('p', { class: 'muted' }, '—'))
}

/**
 * The panel, a region named "Why"; `sessionId()` names the session shown. `extras` are other
 * features' lines (`async (sessionId) => node | null`), shown under the round picker.
 */
export function whyPanel(sessionId, extras = []) {
  const el = h('section', { id: 'why-panel', class: 'panel', 'aria-label': t('why'), tabindex: '-1', hidden: true })
  let chosen = null
  let rounds = []

  async function show(sid, which) {
    const body = h('div', { class: 'why-body' }, t('loading'))
    el.querySelector('.why-body')?.replaceWith(body)
    if (which === NOW) {
      const r = await attempt(() => audit.active(sid))
      if (!r) return
      const vars = h('div', { class: 'variables' })
      mount(body, h('h3', {}, t('lore')), loreTable(r.audit && r.audit.lore), parameters({ proposed: r.callConfig }), vars)
      await variablesTable(vars, sid, null)
      return
    }
    const [owner, recordId] = which.split('|')
    const d = await attempt(() => audit.assembly(owner, recordId))
    if (!d) return
    const record = d.assembly || {}
    const vars = h('div', { class: 'variables' })
    const round = rounds.find((r) => `${r.sessionId}|${r.recordId}` === which)
    mount(body,
      h('p', { class: 'muted' }, `${t('verification')}: ${d.verification ? d.verification.status : '?'}`),
      h('h3', {}, t('lore')), loreTable(record.lore), sectionsList(d.sections), parameters(record.parameters), vars)
    const replySeq = round && round.references ? round.references.replySeq : null
    if (replySeq !== null && replySeq !== undefined) await variablesTable(vars, sid, replySeq)
  }

  /** Draw the panel; with `replySeq`, showing the round that wrote that reply. */
  async function refresh(replySeq = null) {
    const sid = sessionId()
    if (!sid) return
    rounds = (await attempt(() => roundsOf(sid))) || []
    const key = (r) => `${r.sessionId}|${r.recordId}`
    const wrote = replySeq === null ? null : rounds.find((r) => r.references && r.references.replySeq === replySeq)
    if (wrote) chosen = key(wrote)
    if (!chosen || (chosen !== NOW && !rounds.some((r) => key(r) === chosen))) chosen = rounds.length ? key(rounds[0]) : NOW
    const options = [...rounds.map((r) => [key(r), `${t('whyRound')} ${r.turn}.${r.step} · ${r.status}`]), [NOW, t('whyNow')]]
    mount(el, h('h2', {}, t('why')),
      labelledSelect(t('whyRound'), options, chosen, (v) => {
        chosen = v
        show(sid, v)
      }),
      rounds.length ? null : h('p', { class: 'muted' }, t('noRounds')),
      await Promise.all(extras.map((line) => line(sid).catch(() => null))),
      h('div', { class: 'why-body' }))
    await show(sid, chosen)
  }

  return { el, refresh }
}
