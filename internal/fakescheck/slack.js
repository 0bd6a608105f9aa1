// Slack through its own Web API client (@slack/web-api): the methods
// adapters/slack calls, and the chatStream helper, which streams with
// `chunks`.
import { WebClient } from '@slack/web-api';
import { expect, equal } from './assert.js';

export function slack(env) {
  const s = env.slack;
  const client = new WebClient(s.token, { slackApiUrl: s.api_url, retryConfig: { retries: 0 } });
  const person = 'U1';
  let dm;
  let posted;
  let pane;

  return [
    ['auth.test', async () => equal((await client.auth.test()).user_id, s.bot_user, 'user_id')],
    ['apps.connections.open', async () => {
      const app = new WebClient(s.app_token, { slackApiUrl: s.api_url, retryConfig: { retries: 0 } });
      expect((await app.apps.connections.open()).url.startsWith('ws'), 'a websocket url');
    }],
    ['conversations.open', async () => {
      dm = (await client.conversations.open({ users: person })).channel.id;
      expect(dm.startsWith('D'), `an IM channel, got ${dm}`);
    }],
    ['chat.postMessage', async () => {
      const r = await client.chat.postMessage({
        channel: dm, text: 'Added *Buy milk*',
        blocks: [{ type: 'section', text: { type: 'mrkdwn', text: 'Added *Buy milk*' } },
          { type: 'actions', elements: [{ type: 'button', action_id: 'undo', text: { type: 'plain_text', text: 'Undo' }, value: 'u1' }] }],
        metadata: { event_type: 'tidybot_run', event_payload: { run: 'r1' } },
      });
      posted = r.ts;
      expect(posted, 'ts');
    }],
    ['chat.update', async () => equal((await client.chat.update({ channel: dm, ts: posted, text: 'Undone' })).ts, posted, 'ts')],
    ['chat.postEphemeral', async () => expect((await client.chat.postEphemeral({ channel: dm, user: person, text: 'Only you' })).ok, 'ok')],
    ['conversations.history', async () => expect((await client.conversations.history({ channel: dm, limit: 10 })).messages, 'messages')],
    ['conversations.replies', async () => expect((await client.conversations.replies({ channel: dm, ts: posted })).messages, 'messages')],
    ['chat.startStream, appendStream, stopStream (markdown_text)', async () => {
      const { ts } = await client.chat.startStream({ channel: dm, thread_ts: posted, markdown_text: 'One' });
      await client.chat.appendStream({ channel: dm, ts, markdown_text: ', two' });
      const r = await client.chat.stopStream({ channel: dm, ts, markdown_text: ', three.' });
      equal(r.message?.text, 'One, two, three.', 'the streamed message');
    }],
    ['chatStream helper (chunks)', async () => {
      const stream = client.chatStream({ channel: dm, thread_ts: posted, buffer_size: 1 });
      await stream.append({ markdown_text: 'Four' });
      await stream.append({ markdown_text: ', five' });
      const r = await stream.stop({ markdown_text: ', six.' });
      equal(r.message?.text, 'Four, five, six.', 'the streamed message');
    }],
    ['views.publish', async () => {
      const r = await client.views.publish({
        user_id: person,
        view: { type: 'home', blocks: [{ type: 'header', text: { type: 'plain_text', text: 'tidybot' } },
          { type: 'section', text: { type: 'mrkdwn', text: 'Autopilot: off' } },
          { type: 'actions', elements: [{ type: 'button', action_id: 'setting', text: { type: 'plain_text', text: 'Turn autopilot on' }, value: 'autopilot:on' }] }] },
      });
      equal(r.view?.type, 'home', 'the published view');
    }],
    ['chat.delete', async () => expect((await client.chat.delete({ channel: dm, ts: posted })).ok, 'ok')],
    ['assistant.threads.setStatus', async () => {
      const res = await fetch(`${env.control}/slack/assistant?user=${person}&viewing=C1`, { method: 'POST' });
      pane = await res.json();
      await client.assistant.threads.setStatus({ channel_id: pane.channel, thread_ts: pane.thread_ts, status: 'is looking at your tasks…' });
    }],
    ['assistant.threads.setStatus in a channel thread', async () => {
      const top = await client.chat.postMessage({ channel: 'C1', text: 'what is due?' });
      await client.assistant.threads.setStatus({ channel_id: 'C1', thread_ts: top.ts, status: 'is looking at your tasks…' });
    }],
    ['assistant.threads.setSuggestedPrompts', async () => {
      await client.assistant.threads.setSuggestedPrompts({
        channel_id: pane.channel, thread_ts: pane.thread_ts, title: 'Try',
        prompts: [{ title: 'Today', message: 'What is due today?' }],
      });
    }],
    ['assistant.threads.setTitle', async () => {
      await client.assistant.threads.setTitle({ channel_id: pane.channel, thread_ts: pane.thread_ts, title: 'Tasks' });
    }],
  ];
}
