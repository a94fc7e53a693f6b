// Token counts (docs/webui.md "Token counts"): each message's, and the next request's whole
// prompt against the bound preset's context size. The count is the Assembler's own estimate —
// ceil(characters / 3.5) per message, characters being Unicode code points — the number its
// history budget trims by, so what is shown is what the assembly counts.

import { h, mount } from './core.js'
import { extendText, t } from './i18n.js'
import { presets } from './api.js'

extendText({
  en: {
    tokens: '{n} tokens', nextPrompt: 'Next prompt: {n} tokens of {max} (preset context size)',
    nextPromptNoMax: 'Next prompt: {n} tokens (the preset sets no context size)',
  },
  zh: { tokens: '{n} 个 token', nextPrompt: '下一次提示：{n} / {max} 个 token（预设上下文长度）', nextPromptNoMax: '下一次提示：{n} 个 token（预设未设上下文长度）' },
})

/** The Assembler's estimate of one message: ceil(2c / 7), at least 1 (c = code points). */
export function estimateTokens(text) {
  const c = [...(text || '')].length
  return Math.floor((2 * c + 6) / 7) || 1
}

async function post(path, body) {
  const response = await fetch(path, { method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
  if (!response.ok) throw new Error(`HTTP ${response.status}`)
  return response.json()
}

async function contextSize(sessionId) {
  const list = await presets.list(sessionId)
  if (!list.selectedId) return null
  const response = await fetch(`/pmp-dsh-tavern/api/v1/presets/${encodeURIComponent(list.selectedId)}`, { credentials: 'same-origin' })
  if (!response.ok) return null
  const preset = (await response.json()).preset || {}
  const sampling = preset.sampling || {}
  return sampling.max_context ?? sampling.maxContext ?? null
}

/**
 * The line under the message box; `refresh(sessionId, typed)` recounts what the next request
 * would send (the Assembler's preview, with the typed text as its input).
 */
export function nextPromptLine() {
  const el = h('p', { class: 'muted tokens', 'aria-live': 'off' })
  let generation = 0
  async function refresh(sessionId, typed) {
    const mine = ++generation
    try {
      const [preview, max] = await Promise.all([
        post('/dsh-assembler/api/v1/preview', typed && typed.trim() ? { sessionId, input: typed } : { sessionId }),
        contextSize(sessionId),
      ])
      if (mine !== generation) return
      const n = preview.preview.messages.reduce((sum, m) => sum + estimateTokens(m.content), 0)
      el.dataset.tokens = String(n)
      mount(el, max ? t('nextPrompt', { n, max }) : t('nextPromptNoMax', { n }))
    } catch {
      mount(el) // no Assembler, or the server is away: no count rather than a wrong one
    }
  }
  return { el, refresh }
}
