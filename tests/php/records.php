<?php
// Reads DQ.STATS, DQ.GET and DQ.CONFIG through Predis, a client nobody
// here wrote, as a PHP user would: the record's flat field/value array
// turned into an associative array. Predis returns a simple-string reply
// as a Predis\Response\Status object, which cannot key an array, so this
// works only because dq sends record field names as bulk strings (as
// Redis' own XINFO and MEMORY STATS do). Exits non-zero on any failure.
//
//   php tests/php/records.php redis://127.0.0.1:PORT
require 'Predis/Autoloader.php';
Predis\Autoloader::register();

$url = $argv[1] ?? getenv('DQ_REDIS_URL');
$parts = parse_url($url);
$client = new Predis\Client(['host' => $parts['host'], 'port' => $parts['port']]);

function check($ok, $what) {
    if (!$ok) {
        fwrite(STDERR, "records.php: FAILED: $what\n");
        exit(1);
    }
}

// A record's flat array as a PHP associative array; every field name must
// be a string.
function record($flat, $what) {
    check(is_array($flat), "$what is an array");
    $out = [];
    for ($i = 0; $i + 1 < count($flat); $i += 2) {
        check(is_string($flat[$i]), "$what: field name " . $i / 2 . " is a string, got " . gettype($flat[$i]) . (is_object($flat[$i]) ? ' ' . get_class($flat[$i]) : ''));
        $out[$flat[$i]] = $flat[$i + 1];
    }
    return $out;
}

$queue = 'php:' . getmypid();
$client->executeRaw(['DEL', $queue]);
$client->executeRaw(['DQ.ADD', $queue, 'pay', 'ID', 'a']);
$client->executeRaw(['DQ.ADD', $queue, 'pay', 'ID', 'b', 'DELAY', '1h']);

$stats = record($client->executeRaw(['DQ.STATS', $queue]), 'DQ.STATS');
check($stats['ready'] === 1 && $stats['delayed'] === 1, 'DQ.STATS counts: ' . json_encode($stats));
check($stats['added'] === 2, 'DQ.STATS added');

$get = record($client->executeRaw(['DQ.GET', $queue, 'a']), 'DQ.GET');
check($get['id'] === 'a' && $get['payload'] === 'pay', 'DQ.GET id and payload');
// Words among the values are bulk strings too.
check($get['state'] === 'ready', 'DQ.GET state is the string ready, got ' . var_export($get['state'], true));
check($get['max-attempts-from'] === 'module', 'DQ.GET max-attempts-from');

$config = record($client->executeRaw(['DQ.CONFIG', $queue]), 'DQ.CONFIG');
check($config['lease-ms-from'] === 'module', 'DQ.CONFIG lease-ms-from');

$client->executeRaw(['DEL', $queue]);
echo "records.php: DQ.STATS, DQ.GET and DQ.CONFIG read as PHP arrays through Predis\n";
