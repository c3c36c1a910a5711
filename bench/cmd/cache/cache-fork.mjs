// The reference harness's fork scenario for bench/cmd/cache (written into the
// harness copy and run there on Node 22). The rc.8 runtime of lib/runtime.mjs's
// compose(), with the published DeepSeek adapter (@deepseek-ai/dsh-llm-deepseek,
// route deepseek-official) pointed at the loopback model instead of the scripted
// in-process one, a read_file tool of our own (the reference's file tools are not
// in the pinned set), and the subagent tools for spawn and fork. One parent agent
// takes each prompt as one turn, in order. Prints one JSON line.
//
//   node cache-fork.mjs BASE_URL CWD PROMPT...
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import LlmRuntime, { createUserMessage } from '@deepseek-ai/dsh-llm'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import SystemPrompt from '@deepseek-ai/dsh-system-prompt'
import ToolRuntime, { defineTool } from '@deepseek-ai/dsh-tools'
import AgentRegistry from '@deepseek-ai/dsh-agent'
import AgentLoop from '@deepseek-ai/dsh-agent-loop'
import SubagentRuntime from '@deepseek-ai/dsh-subagent'
import * as Spawn from '@deepseek-ai/dsh-subagent-spawn-in-process'
import * as Fork from '@deepseek-ai/dsh-subagent-fork-in-process'
import * as ToolSubagent from '@deepseek-ai/dsh-tool-subagent'
import * as DeepSeek from '@deepseek-ai/dsh-llm-deepseek'

const [, , baseURL, cwd, ...prompts] = process.argv

const ctx = new Context()
await ctx.plugin(LlmRuntime)
await ctx.plugin(SessionStore)
await ctx.plugin(SystemPrompt, {})
await ctx.plugin(ToolRuntime, {})
await ctx.plugin(AgentRegistry)
await ctx.plugin(AgentLoop, { agents: [] })
await ctx.plugin(SubagentRuntime)
await ctx.plugin(Spawn, { providerName: 'spawn' })
await ctx.plugin(Fork, { providerName: 'fork' })
await ctx.plugin(ToolSubagent, { provider: 'spawn', enableRunInBackground: false, maxDepth: 3 })
await ctx.plugin(ToolSubagent, { provider: 'fork', toolName: 'subagent_fork', enableRunInBackground: false, maxDepth: 3 })
await ctx.plugin(DeepSeek, { baseURL, apiKeyEnv: 'DEEPSEEK_API_KEY', retryPolicy: { mode: 'normal', maxRetries: 0 } })
ctx.tools.register(defineTool({
  name: 'read_file',
  description: 'Read a text file of the working directory.',
  parameters: { path: { type: 'string', required: true, description: 'the file, relative to the working directory' } },
  output: { schema: { type: 'string' }, render: (_args, value) => [{ type: 'text', text: value }] },
  isConcurrencySafe: () => true,
  async execute(args, exec) {
    return readFile(join(cwd, args.path), { encoding: 'utf8', signal: exec.signal })
  },
}))

const parent = ctx.agentLoop.create(SessionId('parent'), { provider: 'deepseek-official', model: 'deepseek-flash' })
for (const text of prompts) {
  parent.followup(createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'user' } }))
  await parent.whenIdle()
}
const ends = parent.session.events.filter(e => e.type === 'turn/end')
console.log(JSON.stringify({ turns: ends.length, ends: ends.map(e => e.reason ?? e.data?.reason ?? e) }))
process.exit(0)
