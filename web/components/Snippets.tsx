import { useState } from 'preact/hooks';

/** Ready-to-paste code for a new key, filled with this gateway's URL and a model it serves. */
export function snippets(baseUrl: string, key: string, model: string): Record<string, string> {
  const v1 = `${baseUrl.replace(/\/$/, '')}/v1`;
  return {
    curl: `curl ${v1}/chat/completions \\
  -H "Authorization: Bearer ${key}" \\
  -H "Content-Type: application/json" \\
  -d '{"model": "${model}", "messages": [{"role": "user", "content": "Hello"}]}'`,
    'openai-node': `import OpenAI from 'openai';

const client = new OpenAI({ baseURL: '${v1}', apiKey: '${key}' });
const answer = await client.chat.completions.create({
  model: '${model}',
  messages: [{ role: 'user', content: 'Hello' }],
});
console.log(answer.choices[0].message.content);`,
    Python: `from openai import OpenAI

client = OpenAI(base_url="${v1}", api_key="${key}")
answer = client.chat.completions.create(
    model="${model}",
    messages=[{"role": "user", "content": "Hello"}],
)
print(answer.choices[0].message.content)`,
  };
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      setTimeout(() => setCopied(false), 2000);
    } catch {
      setCopied(false);
    }
  };
  return (
    <button type="button" onClick={copy} aria-label={label}>
      {copied ? 'Copied' : 'Copy'}
    </button>
  );
}

export function Snippets({ baseUrl, secret, models }: { baseUrl: string; secret: string; models: string[] }) {
  const [model, setModel] = useState(models[0] ?? 'MODEL');
  const all = snippets(baseUrl, secret, model);
  const [tab, setTab] = useState('curl');
  return (
    <div class="snippets">
      <div class="row wrap between">
        <div role="tablist" aria-label="Code examples" class="tabs">
          {Object.keys(all).map((name) => (
            <button type="button" role="tab" key={name} aria-selected={tab === name} class={tab === name ? 'tab on' : 'tab'} onClick={() => setTab(name)}>
              {name}
            </button>
          ))}
        </div>
        {models.length > 1 ? (
          <label class="inline">
            Model{' '}
            <select value={model} onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
              {models.map((m) => (
                <option key={m} value={m}>
                  {m}
                </option>
              ))}
            </select>
          </label>
        ) : null}
      </div>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: the code panel scrolls sideways, so it takes focus to be scrolled by keyboard */}
      <pre role="tabpanel" tabIndex={0}>
        <code>{all[tab]}</code>
      </pre>
      <CopyButton text={all[tab]!} label={`Copy the ${tab} example`} />
    </div>
  );
}
