// Display regex scripts (SillyTavern's regex extension, docs/resources.md#regex-scripts): the
// `markdownOnly` scripts of the bound card, then of the bound preset, change how a message is
// shown — never its stored text or the prompt. JavaScript's own RegExp runs them, which is the
// dialect SillyTavern's scripts are written in.

import { characters, presets } from './api.js'

export const USER_INPUT = 1
export const AI_OUTPUT = 2
const SLASHED = /^\/(.+)\/([dgimsuvy]*)$/s

/** The display scripts for a session: card first, then preset (SillyTavern's order). */
export async function displayScripts(sessionId, characterId) {
  const [card, presetList] = await Promise.all([characters.regexScripts(characterId), presets.list(sessionId)])
  const preset = presetList.selectedId ? await presets.regexScripts(presetList.selectedId) : { regexScripts: [] }
  return [...card.regexScripts, ...preset.regexScripts].filter((s) => s && s.markdownOnly === true && s.disabled !== true)
}

function compile(findRegex) {
  const m = SLASHED.exec(findRegex || '')
  try {
    // A bare pattern has no flags: it replaces the first match only, case-sensitively.
    return m ? new RegExp(m[1], m[2]) : new RegExp(findRegex)
  } catch {
    return null
  }
}

function applyOne(text, script) {
  const re = script.findRegex ? compile(script.findRegex) : null
  if (!re) return text
  const trims = (script.trimStrings || []).filter((x) => typeof x === 'string' && x)
  const trim = (value) => trims.reduce((acc, x) => acc.split(x).join(''), value ?? '')
  const template = String(script.replaceString ?? '').replace(/\{\{match\}\}/gi, '$0')
  return text.replace(re, (...args) => {
    const end = typeof args[args.length - 1] === 'object' ? args.length - 3 : args.length - 2
    const captures = args.slice(0, end)
    return template.replace(/\$(\d+)/g, (_, n) => trim(captures[Number(n)]))
  })
}

/** `text` as shown: every script whose placement covers `placement`, in order. */
export function applyDisplay(text, scripts, placement) {
  let out = text
  for (const script of scripts) {
    if (Array.isArray(script.placement) && script.placement.includes(placement)) out = applyOne(out, script)
  }
  return out
}
