"""The web console (`/console` on the server's own port; `openddb serve --console off` removes it).

Static files served from the package (`static/`): a page, its stylesheet and its script. The script signs every
call with SigV4 in the browser and sends it to the server's own DynamoDB JSON API (`POST /`, X-Amz-Target), so
the console has no privileged path: each action is one ordinary API call, validated, authenticated and metered
as any client's. See docs/CONSOLE.md.
"""
