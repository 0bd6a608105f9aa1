// OpenAI through its own client (openai): the calls agent/openai makes,
// on both APIs, streamed and not, and the model lookup and transcription
// of internal/checkup and media.
import OpenAI, { toFile } from 'openai';
import { expect, equal } from './assert.js';

const tool = {
  type: 'function',
  name: 'final_answer',
  description: 'Answer the person.',
  strict: true,
  parameters: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false },
};

export function openai(env) {
  const o = env.openai;
  const client = new OpenAI({ apiKey: o.key, baseURL: o.base_url, maxRetries: 0 });
  const chatTool = { type: 'function', function: { name: tool.name, description: tool.description, strict: true, parameters: tool.parameters } };
  const messages = [{ role: 'system', content: 'You tidy Todoist.' }, { role: 'user', content: 'hello' }];

  return [
    ['POST /responses', async () => {
      const r = await client.responses.create({ model: 'gpt-6-sol', input: 'hello', tools: [tool], reasoning: { effort: 'low' }, store: false, include: ['reasoning.encrypted_content'] });
      equal(r.status, 'completed', 'status');
      expect(r.output_text.length > 0, 'output text');
    }],
    ['POST /responses stream', async () => {
      const stream = await client.responses.create({ model: 'gpt-6-sol', input: 'hello', tools: [tool], stream: true, store: false });
      let done;
      for await (const ev of stream) if (ev.type === 'response.completed') done = ev.response;
      expect(done, 'a response.completed event');
    }],
    ['POST /chat/completions', async () => {
      const r = await client.chat.completions.create({ model: 'gpt-4.1', messages, tools: [chatTool] });
      expect(r.choices[0].message.content, 'content');
    }],
    ['POST /chat/completions stream', async () => {
      const stream = await client.chat.completions.create({ model: 'gpt-4.1', messages, stream: true, stream_options: { include_usage: true } });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      expect(text, 'streamed content');
    }],
    ['POST /chat/completions json_schema', async () => {
      const r = await client.chat.completions.create({
        model: 'gpt-4.1', messages,
        response_format: { type: 'json_schema', json_schema: { name: 'reply', strict: true, schema: tool.parameters } },
      });
      expect(r.choices[0].message, 'a message');
    }],
    ['GET /models/{id}', async () => equal((await client.models.retrieve('gpt-6-sol')).id, 'gpt-6-sol', 'id')],
    ['POST /audio/transcriptions', async () => {
      const file = await toFile(Buffer.from(o.voice, 'base64'), 'voice.ogg', { type: 'audio/ogg' });
      const r = await client.audio.transcriptions.create({ model: 'gpt-4o-transcribe', file });
      expect(r.text, 'text');
    }],
    ['a wrong key is a 401', async () => {
      const bad = new OpenAI({ apiKey: 'sk-wrong', baseURL: o.base_url, maxRetries: 0 });
      let err;
      try {
        await bad.models.retrieve('gpt-6-sol');
      } catch (e) {
        err = e;
      }
      expect(err instanceof OpenAI.AuthenticationError, `an AuthenticationError, got ${err}`);
    }],
  ];
}
