// CDNaaS signed URLs and cookies, checked at a cache (njs 0.7, Debian libnginx-mod-http-js).
// Shipped as is by cdnaas.delivery.access (not a template); nginx-cache-access.conf.j2
// imports it and preloads the vCDN's keys as the object cdnaas_keys (a root-only JSON
// file the VIM driver writes: {"paths": [protected prefixes], "keys": {kid: secret}}).
//
// A token is the query arguments (or the cookie CDNaaS-Token holding the same text)
//   exp=<unix seconds>&kid=<key id>[&prefix=<path prefix>][&ip=<IPv4 CIDR>]&sig=<base64url>
// where sig = HMAC-SHA256(secret of kid, "cdnaas-v1\n" + exp + "\n" + kid + "\n" + scope
// + "\n" + ip) and scope is "prefix:" + prefix (the path must start with it) or "path:" +
// the request's decoded path. cdnaas.delivery.access.sign makes the same token.
var crypto = require('crypto');

var FIELDS = ['exp', 'kid', 'prefix', 'ip', 'sig'];
var COOKIE = 'CDNaaS-Token';

// {field: value} of a token's text ("a=b&c=d", other arguments skipped), or null when a
// field is repeated or badly escaped.
function parse(text) {
    var token = {};
    var parts = text.split('&');
    for (var i = 0; i < parts.length; i++) {
        var eq = parts[i].indexOf('=');
        var name = eq < 0 ? parts[i] : parts[i].slice(0, eq);
        if (FIELDS.indexOf(name) < 0) {
            continue;
        }
        if (token[name] !== undefined) {
            return null;
        }
        try {
            token[name] = eq < 0 ? '' : decodeURIComponent(parts[i].slice(eq + 1));
        } catch (e) {
            return null;  // a malformed %-escape
        }
    }
    return token;
}

// The token of the request: its query's fields when it has a sig, else its cookie's.
function token_of(r) {
    var query = parse(r.variables.args || '');
    if (query === null || query.sig !== undefined) {
        return query;
    }
    var cookies = (r.headersIn.Cookie || '').split(';');
    for (var i = 0; i < cookies.length; i++) {
        var cookie = cookies[i].trim();
        if (cookie.indexOf(COOKIE + '=') === 0) {
            var value = cookie.slice(COOKIE.length + 1);
            if (value.charAt(0) === '"' && value.charAt(value.length - 1) === '"') {
                value = value.slice(1, -1);
            }
            return parse(value);
        }
    }
    return {};
}

// Whether strings a and b are equal, in a time that depends on their length only.
function same(a, b) {
    if (a.length !== b.length) {
        return false;
    }
    var diff = 0;
    for (var i = 0; i < a.length; i++) {
        diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
    }
    return diff === 0;
}

// The IPv4 address text as a 32-bit number, or null.
function ipv4(text) {
    var parts = text.split('.');
    if (parts.length !== 4) {
        return null;
    }
    var value = 0;
    for (var i = 0; i < 4; i++) {
        if (!/^[0-9]{1,3}$/.test(parts[i]) || Number(parts[i]) > 255) {
            return null;
        }
        value = value * 256 + Number(parts[i]);
    }
    return value;
}

// Whether the address is in the IPv4 prefix (a.b.c.d/n).
function inside(address, prefix) {
    var slash = prefix.indexOf('/');
    var network = ipv4(slash < 0 ? prefix : prefix.slice(0, slash));
    var bits = slash < 0 ? 32 : Number(prefix.slice(slash + 1));
    var own = ipv4(address);
    if (network === null || own === null || !/^[0-9]{1,2}$/.test(String(bits)) || bits > 32) {
        return false;
    }
    var size = Math.pow(2, 32 - bits);
    return Math.floor(own / size) === Math.floor(network / size);
}

function is_protected(path) {
    var paths = cdnaas_keys.paths;
    for (var i = 0; i < paths.length; i++) {
        if (path.indexOf(paths[i]) === 0) {
            return true;
        }
    }
    return false;
}

// The request's verdict: "ok", or why it is refused (403).
function verdict(r) {
    var path = r.uri;
    if (!is_protected(path)) {
        return 'ok';
    }
    var token = token_of(r);
    if (token === null) {
        return 'malformed';
    }
    if (token.sig === undefined || token.exp === undefined || token.kid === undefined) {
        return 'no-token';
    }
    if (!/^[0-9]{1,12}$/.test(token.exp) || Number(token.exp) <= Date.now() / 1000) {
        return 'expired';
    }
    if (!Object.prototype.hasOwnProperty.call(cdnaas_keys.keys, token.kid)) {
        return 'unknown-key';
    }
    var scope = 'path:' + path;
    if (token.prefix !== undefined) {
        if (path.indexOf(token.prefix) !== 0) {
            return 'other-prefix';
        }
        scope = 'prefix:' + token.prefix;
    }
    var ip = token.ip === undefined ? '' : token.ip;
    if (ip !== '' && !inside(r.variables.remote_addr, ip)) {
        return 'other-client';
    }
    var message = ['cdnaas-v1', token.exp, token.kid, scope, ip].join('\n');
    var expected = crypto.createHmac('sha256', cdnaas_keys.keys[token.kid])
        .update(message).digest('base64url');
    return same(expected, token.sig) ? 'ok' : 'bad-signature';
}

export default {verdict};
