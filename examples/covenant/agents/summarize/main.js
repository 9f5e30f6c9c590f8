// Covenant stdin/stdout contract: one JSON line in, one JSON line out.
let input = '';
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const line = input.split('\n')[0];
  const request = JSON.parse(line);
  const words = String(request.text || '').split(/\s+/).filter(Boolean);
  const summary = words.slice(0, 12).join(' ') + (words.length > 12 ? ' ...' : '');
  process.stdout.write(JSON.stringify({ text: summary, sources: [] }) + '\n');
});
