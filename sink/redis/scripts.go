package redis

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"

	"github.com/sluice-cdc/sluice/pipeline"
)

// The Lua scripts that apply a chunk of messages. Each runs atomically on
// the server (no other command runs in between, and with appendonly the
// whole script's effects reach the AOF together or not at all).
//
// KEYS[1] is the pipeline's high-water hash:
//
//	seq             highest sequence number applied
//	epoch           highest epoch that has written (or recovered)
//	end:<source>    last transaction end of <source> (pipeline.AppendEnd JSON)
//	endseq:<source> the sequence number of the message that carried it
//
// ARGV[1] is the writer's epoch. A stored epoch above it makes the script
// refuse with an error starting with "FENCED". Messages whose seq is not
// above the stored seq are skipped (a retried batch is applied once).
// Numbers are compared as decimal strings (by length, then bytes) so that
// every uint64 compares exactly; Lua numbers are doubles.
//
// A command that fails part-way (say WRONGTYPE, because a key the sink
// writes holds another type) stops the script: Redis does not roll back,
// so the script first records the high-water mark of what it did apply and
// then returns an error starting with "SLUICE".

const luaPrelude = `
local function gt(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local function iserr(r) return type(r) == 'table' and r.err ~= nil end
local hw, epoch = KEYS[1], ARGV[1]
local cur = redis.call('HMGET', hw, 'seq', 'epoch')
local stored, held = cur[1] or '0', cur[2] or '0'
if gt(held, epoch) then
  return redis.error_reply('FENCED epoch ' .. held .. ' has written here, this writer has epoch ' .. epoch)
end
local last = stored
local ends, order = {}, {}
local function noteEnd(src, e, seq)
  if ends[src] == nil then order[#order + 1] = src end
  ends[src] = {e, seq}
end
local function commit()
  local h = {'seq', last, 'epoch', epoch}
  for _, src in ipairs(order) do
    local x = ends[src]
    h[#h + 1] = 'end:' .. src
    h[#h + 1] = x[1]
    h[#h + 1] = 'endseq:' .. src
    h[#h + 1] = x[2]
  end
  redis.call('HSET', hw, unpack(h))
end
local function failed(seq, r)
  commit()
  return redis.error_reply('SLUICE applying seq ' .. seq .. ' failed: ' .. r.err)
end
`

// streamBody: ARGV[2] is MAXLEN ("0" for none); then 5 arguments per
// message: seq, source, key, value, end ("" when none). KEYS[1+i] is the
// stream of message i.
const streamBody = `
local maxlen = ARGV[2]
for i = 1, #KEYS - 1 do
  local a = 3 + (i - 1) * 5
  local seq = ARGV[a]
  if gt(seq, stored) then
    local key, src, e = KEYS[i + 1], ARGV[a + 1], ARGV[a + 4]
    local r
    if maxlen == '0' then
      if e == '' then
        r = redis.pcall('XADD', key, '*', F_SEQ, seq, F_EPOCH, epoch, F_SOURCE, src, F_KEY, ARGV[a + 2], F_VALUE, ARGV[a + 3])
      else
        r = redis.pcall('XADD', key, '*', F_SEQ, seq, F_EPOCH, epoch, F_SOURCE, src, F_KEY, ARGV[a + 2], F_VALUE, ARGV[a + 3], F_END, e)
      end
    else
      if e == '' then
        r = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, '*', F_SEQ, seq, F_EPOCH, epoch, F_SOURCE, src, F_KEY, ARGV[a + 2], F_VALUE, ARGV[a + 3])
      else
        r = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, '*', F_SEQ, seq, F_EPOCH, epoch, F_SOURCE, src, F_KEY, ARGV[a + 2], F_VALUE, ARGV[a + 3], F_END, e)
      end
    end
    if iserr(r) then return failed(seq, r) end
    last = seq
    if e ~= '' then noteEnd(src, e, seq) end
  end
end
commit()
return last
`

// materializeBody: per message the arguments seq, source, end, action,
// n, then n field/value pairs; and the keys KEYS[k] (the row's hash) and
// KEYS[k+1] (its hash before the change: the same key unless the primary
// key changed). Actions:
//
//	R  replace: delete the old and the new hash, then set the fields
//	M  merge (a partial row image): move the old hash to the new key if the
//	   key changed, then set the fields present
//	D  delete the hash
//	S  nothing (DDL): only the high-water mark moves
const materializeBody = `
local function hset(key, f, nf)
  local r
  local i = 0
  while i < nf do
    local m = math.min(nf - i, 1000)
    r = redis.pcall('HSET', key, unpack(ARGV, f + 2 * i, f + 2 * (i + m) - 1))
    if iserr(r) then return r end
    i = i + m
  end
  return r
end
local a, k = 2, 2
while a <= #ARGV do
  local seq, src, e, act, nf = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4])
  local f = a + 5
  a = f + 2 * nf
  local key, old = KEYS[k], KEYS[k + 1]
  k = k + 2
  if gt(seq, stored) then
    local r
    if act == 'D' then
      r = redis.pcall('DEL', key)
    elseif act == 'R' then
      if old ~= key then redis.pcall('DEL', old) end
      redis.pcall('DEL', key)
      r = hset(key, f, nf)
    elseif act == 'M' then
      if old ~= key and redis.call('EXISTS', old) == 1 then
        r = redis.pcall('RENAME', old, key)
      end
      if not iserr(r) then r = hset(key, f, nf) end
    end
    if iserr(r) then return failed(seq, r) end
    last = seq
    if e ~= '' then noteEnd(src, e, seq) end
  end
end
commit()
return last
`

// recoverScript fences and reads in one step: it refuses (FENCED) if a
// higher epoch has written, else records ARGV[1] as the epoch (so that an
// older writer is refused from now on) and returns the whole hash.
const recoverScript = `
local function gt(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local held = redis.call('HGET', KEYS[1], 'epoch') or '0'
if gt(held, ARGV[1]) then
  return redis.error_reply('FENCED epoch ' .. held .. ' has written here, this writer has epoch ' .. ARGV[1])
end
if held ~= ARGV[1] then redis.call('HSET', KEYS[1], 'epoch', ARGV[1]) end
return redis.call('HGETALL', KEYS[1])
`

// script is a Lua script with its SHA1, run with EVALSHA and loaded with
// EVAL when the server does not know it (NOSCRIPT).
type script struct {
	src, sha string
}

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(h[:])}
}

var fieldNames = strings.NewReplacer(
	"F_SEQ", quoteLua(pipeline.HeaderSeq),
	"F_EPOCH", quoteLua(pipeline.HeaderEpoch),
	"F_SOURCE", quoteLua(pipeline.HeaderSource),
	"F_END", quoteLua(pipeline.HeaderEnd),
	"F_KEY", quoteLua(FieldKey),
	"F_VALUE", quoteLua(FieldValue),
)

func quoteLua(s string) string { return "'" + s + "'" }

var (
	streamScript      = newScript(luaPrelude + fieldNames.Replace(streamBody))
	materializeScript = newScript(luaPrelude + materializeBody)
	fenceScript       = newScript(recoverScript)
)

// Stream entry field names besides the pipeline.Header* ones.
const (
	FieldKey   = "key"
	FieldValue = "value"
)
