/**
 * Markdown of task descriptions, rendered safely: `marked` only parses (its lexer gives a token
 * tree) and the tree becomes Preact elements here. Nothing is ever assigned as HTML, so raw
 * HTML in a description shows as the text it is; links keep only http(s), mailto and
 * same-site addresses; images become links (no request leaves for a third-party host).
 */
import { lexer, type Token, type Tokens } from "marked"
import type { ComponentChildren, JSX } from "preact"
import { useMemo } from "preact/hooks"

const NAMED: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
  copy: "©",
  reg: "®",
  trade: "™",
  hellip: "…",
  mdash: "—",
  ndash: "–",
  laquo: "«",
  raquo: "»"
}

/** Character references in text (`&amp;`, `&#169;`, `&#xA9;`) as the characters they name. */
export const decodeEntities = (text: string): string =>
  text.includes("&")
    ? text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,8});/gi, (whole, ref: string) => {
        if (ref[0] === "#") {
          const code = ref[1] === "x" || ref[1] === "X" ? Number.parseInt(ref.slice(2), 16) : Number(ref.slice(1))
          return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole
        }
        return NAMED[ref.toLowerCase()] ?? whole
      })
    : text

/** The address if it is safe to link to, else undefined. */
export const safeHref = (href: string): string | undefined => {
  const trimmed = href.trim()
  if (trimmed.startsWith("#") || (trimmed.startsWith("/") && !trimmed.startsWith("//"))) return trimmed
  try {
    const url = new URL(trimmed)
    return url.protocol === "http:" || url.protocol === "https:" || url.protocol === "mailto:" ? url.href : undefined
  } catch {
    return undefined
  }
}

const inline = (tokens: ReadonlyArray<Token> | undefined): ComponentChildren =>
  tokens?.map((t, i) => <Inline key={i} token={t} />)

const Inline = ({ token }: { readonly token: Token }): ComponentChildren => {
  const t = token as Tokens.Generic
  switch (t.type) {
    case "text":
      return t.tokens !== undefined ? inline(t.tokens) : decodeEntities((t as Tokens.Text).text)
    case "escape":
      return (t as Tokens.Escape).text
    case "strong":
      return <strong>{inline(t.tokens)}</strong>
    case "em":
      return <em>{inline(t.tokens)}</em>
    case "del":
      return <del>{inline(t.tokens)}</del>
    case "codespan":
      return <code>{(t as Tokens.Codespan).text}</code>
    case "br":
      return <br />
    case "link": {
      const link = t as Tokens.Link
      const href = safeHref(link.autolink === true ? link.href : decodeEntities(link.href))
      return href === undefined ? (
        inline(link.tokens)
      ) : (
        <a href={href} rel="noopener noreferrer nofollow" target="_blank">
          {inline(link.tokens)}
        </a>
      )
    }
    case "image": {
      const image = t as Tokens.Image
      const href = safeHref(decodeEntities(image.href))
      const alt = decodeEntities(image.text) || "image"
      return href === undefined ? (
        alt
      ) : (
        <a href={href} rel="noopener noreferrer nofollow" target="_blank">
          {alt}
        </a>
      )
    }
    case "checkbox":
      return <input type="checkbox" checked={(t as Tokens.Checkbox).checked} disabled aria-label="checklist item" />
    case "html":
      return (t as Tokens.HTML).text
    default:
      return typeof t.raw === "string" ? t.raw : ""
  }
}

const Block = ({ token }: { readonly token: Token }): JSX.Element | null => {
  const t = token as Tokens.Generic
  switch (t.type) {
    case "space":
    case "def":
      return null
    case "paragraph":
      return <p>{inline(t.tokens)}</p>
    case "text":
      return <p>{t.tokens !== undefined ? inline(t.tokens) : decodeEntities((t as Tokens.Text).text)}</p>
    case "heading": {
      // Inside a task page the description sits under the page's h1 and a section heading.
      const depth = Math.min(6, (t as Tokens.Heading).depth + 2)
      const H = `h${depth}` as "h3"
      return <H>{inline(t.tokens)}</H>
    }
    case "code":
      return (
        <pre>
          <code>{(t as Tokens.Code).text}</code>
        </pre>
      )
    case "blockquote":
      return <blockquote>{blocks(t.tokens)}</blockquote>
    case "hr":
      return <hr />
    case "list": {
      const list = t as Tokens.List
      const items = list.items.map((item, i) => (
        <li key={i}>{item.loose ? blocks(item.tokens) : item.tokens.map((c, j) => <Tight key={j} token={c} />)}</li>
      ))
      return list.ordered ? (
        <ol start={typeof list.start === "number" ? list.start : undefined}>{items}</ol>
      ) : (
        <ul>{items}</ul>
      )
    }
    case "table": {
      const table = t as Tokens.Table
      return (
        <div class="md-table">
          <table>
            <thead>
              <tr>
                {table.header.map((cell, i) => (
                  <th key={i}>{inline(cell.tokens)}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {table.rows.map((row, i) => (
                <tr key={i}>
                  {row.map((cell, j) => (
                    <td key={j}>{inline(cell.tokens)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )
    }
    case "html":
      return <p>{(t as Tokens.HTML).text}</p>
    default:
      return <Inline token={token} />
  }
}

/** A tight list item's children: its text without a paragraph around it. */
const Tight = ({ token }: { readonly token: Token }): JSX.Element | null =>
  token.type === "text" ? <Inline token={token} /> : <Block token={token} />

const blocks = (tokens: ReadonlyArray<Token> | undefined): ComponentChildren =>
  tokens?.map((t, i) => <Block key={i} token={t} />)

export const Markdown = ({ source }: { readonly source: string }) => {
  const tokens = useMemo(() => lexer(source, { gfm: true }), [source])
  return <div class="markdown">{blocks(tokens)}</div>
}
