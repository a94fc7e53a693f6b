// Chat Markdown comes back from the server as sanitized HTML (POST /webui/api/render); this
// module batches requests and caches results by text.

import { render } from './api.js'

const cache = new Map()
const MAX_CACHE = 4096
const BATCH = 256

/** HTML for each text, rendering the ones not cached yet in batches. */
export async function renderAll(texts) {
  const todo = [...new Set(texts.filter((x) => !cache.has(x)))]
  for (let i = 0; i < todo.length; i += BATCH) {
    const batch = todo.slice(i, i + BATCH)
    const { html } = await render(batch)
    batch.forEach((text, k) => cache.set(text, html[k]))
  }
  while (cache.size > MAX_CACHE) cache.delete(cache.keys().next().value)
  return texts.map((x) => cache.get(x))
}

/** Put sanitized server HTML into `el` (parsed inertly, never executed). */
export function setHtml(el, html) {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, 'text/html')
  el.replaceChildren(...doc.body.childNodes)
}
