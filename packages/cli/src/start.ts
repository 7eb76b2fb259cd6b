/**
 * The `taskwright` command's entry. It runs the bundle (`cli.cjs`, beside this file) through V8's
 * code cache: compiling the bundle (2.2 MB then, 1.6 now) and the functions its start-up calls
 * took about 200 ms of every start (half of a server's start-up, and most of a short command like
 * `keys list`). Node 22 does this itself (`module.enableCompileCache`); Node 20 does not, so this
 * file does what it does: the first start compiles and writes the cache, later starts read it.
 *
 * A cache is code, so it is only read from a directory this user owns and nobody else can write,
 * from a file opened without following links that this user owns and nobody else can write, named
 * by the hash of the bundle, the Node version and its flags (V8 itself checks version and flags,
 * but of the bundle only its length). `TASKWRIGHT_CODE_CACHE=off` turns it off;
 * `TASKWRIGHT_CODE_CACHE=/some/dir` puts it elsewhere than `~/.cache/taskwright`. Where there are
 * no user ids to check (Windows) there is no cache.
 *
 * Until this user has a cache, the build's own is read: `npm run build` starts a server once and
 * puts the cache it wrote beside the bundle (scripts/prime-code-cache.mjs), so the first start
 * after a build does not compile either. That file is trusted as far as the bundle is: it must be
 * owned by the bundle's owner and writable by nobody else, and it is opened without following links.
 */
import { createHash, type Hash } from "node:crypto"
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { createRequire } from "node:module"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { StringDecoder } from "node:string_decoder"
import { fileURLToPath } from "node:url"
import { Script } from "node:vm"
import { holdYoungGeneration, withStartupFlags } from "./youngGeneration.js"

const bundle = fileURLToPath(new URL("./cli.cjs", import.meta.url))

/** A cache larger than this is not one this file wrote. */
const MAX_CACHE_BYTES = 64 * 1024 * 1024
/** How long after start the cache is written: by then a server is up and its start-up code compiled. */
const WRITE_AFTER_MS = 2_000

/** This process's user; undefined where there are no user ids to check (Windows), and so no cache. */
const uid = process.getuid?.()

/** Owned by `owner` and writable by no one else. */
const ownedBy = (stats: { readonly uid: number; readonly mode: number }, owner: number | undefined): boolean =>
  stats.uid === owner && (stats.mode & 0o022) === 0

const setting = process.env.TASKWRIGHT_CODE_CACHE?.trim() ?? ""

/** No cache read or written, this user's or the build's: turned off, or no user ids to check. */
const cacheOff = uid === undefined || ["off", "0", "false", "no"].includes(setting.toLowerCase())

/** This user's cache directory, made if missing; undefined when turned off or not safe to use. */
const cacheDirectory = (): string | undefined => {
  if (cacheOff) return undefined
  const dir = setting !== "" ? setting : join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "taskwright")
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const stats = lstatSync(dir)
    return stats.isDirectory() && ownedBy(stats, uid) ? dir : undefined
  } catch {
    return undefined
  }
}

/** The cache's bytes, when the file exists and `owner` alone can have written it. */
const readCache = (file: string, owner: number | undefined): Buffer | undefined => {
  let fd: number | undefined
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW)
    const stats = fstatSync(fd)
    if (!stats.isFile() || !ownedBy(stats, owner) || stats.size > MAX_CACHE_BYTES) return undefined
    return readFileSync(fd)
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

/** Writes the cache whole or not at all (a temporary file renamed), and drops the caches of other builds. */
const writeCache = (dir: string, file: string, buildTag: string, data: Buffer) => {
  const temporary = `${file}.${process.pid}.tmp`
  try {
    writeFileSync(temporary, data, { mode: 0o600, flag: "wx" })
    renameSync(temporary, file)
    for (const name of readdirSync(dir)) {
      if (name.startsWith("cli-") && name.endsWith(".v8") && !name.startsWith(buildTag))
        rmSync(join(dir, name), { force: true })
    }
  } catch {
    rmSync(temporary, { force: true })
  }
}

/** A hash as the cache's file names carry it. */
const tagOf = (hash: Hash) => hash.digest("hex").slice(0, 24)

const digest = (text: string) => tagOf(createHash("sha256").update(text))

/** Under glibc's starting mmap threshold (128 KiB), so the pieces come from its heap and go back to it. */
const PIECE_BYTES = 64 * 1024

/**
 * The bundle's text and its hash, read 64 KiB at a time. Read whole, the 2.2 MB it then was took
 * buffers of up to 4 MB (a string grown by doubling) and 7 MB (the text encoded again to hash it),
 * each mapped on its own; glibc raises its mmap threshold to the size of the largest mapping it
 * frees, and its trim threshold to twice that, so the compiler's allocations then came from the
 * main heap, which a start that compiled left 11 MiB larger for the life of the server.
 */
const readBundle = (): { readonly source: string; readonly hash: string; readonly owner: number } => {
  const fd = openSync(bundle, constants.O_RDONLY)
  try {
    const owner = fstatSync(fd).uid
    const piece = Buffer.allocUnsafeSlow(PIECE_BYTES)
    const hash = createHash("sha256")
    const decoder = new StringDecoder("utf8")
    let source = ""
    for (let read = readSync(fd, piece); read > 0; read = readSync(fd, piece)) {
      const bytes = piece.subarray(0, read)
      hash.update(bytes)
      source += decoder.write(bytes)
    }
    return { source: source + decoder.end(), hash: tagOf(hash), owner }
  } finally {
    closeSync(fd)
  }
}

type Wrapper = (
  exports: object,
  require: NodeJS.Require,
  module: { exports: object },
  filename: string,
  dirname: string
) => void

/**
 * The bundle compiled, from the cache when there is a good one (else a cache written later).
 * A function, so that the source and the cache's bytes are garbage once V8 has them.
 */
const compile = (): Wrapper => {
  const { source, hash, owner } = readBundle()
  const dir = cacheDirectory()
  // cli-<bundle>-<node and its flags>.v8: a new build drops the old build's caches, not its own for other flags.
  const buildTag = `cli-${hash}-`
  const name = `${buildTag}${digest(`${process.version} ${process.arch} ${process.execArgv.join(" ")}`)}.v8`
  const file = dir === undefined ? undefined : join(dir, name)
  const userCache = file === undefined ? undefined : readCache(file, uid)
  // The build's cache, under the same name beside the bundle, when this user has none yet.
  const cachedData = userCache ?? (cacheOff ? undefined : readCache(join(dirname(bundle), name), owner))
  // CommonJS's wrapper, on the bundle's first line so that stack traces keep its line numbers.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: bundle,
    ...(cachedData === undefined ? {} : { cachedData })
  })
  // Written after a start from the build's cache too: this user's then holds what this user's
  // starts compile (the build's holds a server's on SQLite).
  if (dir !== undefined && file !== undefined && (userCache === undefined || script.cachedDataRejected === true)) {
    let written = false
    const write = () => {
      if (written) return
      written = true
      // Made under the flags the next start compiles with: V8 refuses a cache made under others.
      const data = withStartupFlags(() => script.createCachedData())
      writeCache(dir, file, buildTag, data)
    }
    // After start-up, so the cache holds the functions it compiled; at exit for a command that ends sooner.
    setTimeout(write, WRITE_AFTER_MS).unref()
    process.once("exit", write)
  }
  return script.runInThisContext()
}

// Before the bundle compiles: V8 checks a code cache against the flags it was made with.
holdYoungGeneration()
const module = { exports: {} }
compile()(module.exports, createRequire(bundle), module, bundle, dirname(bundle))
