-- A `hits` table with ClickBench's 105 columns and types, generated from row numbers alone: the same
-- scale gives the same rows. Values are skewed so that every one of the 43 queries has an answer
-- (a heavy counter 62, a few dominant referrer domains, rare special users and hashes).
CREATE MACRO h(i, k) AS hash(i * 4096 + k);
CREATE MACRO pick(i, k, items) AS items[1 + (h(i, k) % len(items))::INTEGER];
CREATE MACRO skewed(i, k, n) AS ((h(i, k) % n) * (h(i, k + 1000) % n) // n);
CREATE TABLE hits AS
WITH base AS (
    SELECT
        i,
        TIMESTAMP '2013-07-01 00:00:00' + to_seconds((h(i, 1) % (31 * 86400))::BIGINT) AS event_time,
        CASE WHEN h(i, 2) % 20 = 0 THEN ''
             ELSE 'http://' || pick(i, 3, ['www.google.com', 'google.ru', 'yandex.ru', 'mail.ru', 'news.example.org', 'shop.example.com', 'video.example.net', 'maps.google.com', 'auto.ru', 'weather.example.com'])
                  || '/' || pick(i, 4, ['search', 'item', 'page', 'news', 'watch']) || '/' || skewed(i, 5, 60000)::VARCHAR
        END AS url,
        CASE WHEN h(i, 6) % 5 = 0 THEN ''
             ELSE pick(i, 7, ['https://www.', 'http://', 'https://']) ||
                  (CASE WHEN h(i, 8) % 100 < 35 THEN 'yandex.ru' WHEN h(i, 8) % 100 < 60 THEN 'google.com'
                        ELSE pick(i, 9, ['mail.ru', 'vk.com', 'example.org', 'news.example.org', 'blog.example.com']) END)
                  || '/' || pick(i, 10, ['r', 'search', 'clck/jsredir', 'away']) || '?id=' || (h(i, 11) % 100000)::VARCHAR
        END AS referer,
        CASE WHEN h(i, 12) % 10 < 7 THEN ''
             ELSE pick(i, 13, ['cheap', 'best', 'new', 'used', 'free', 'online', 'google']) || ' ' ||
                  pick(i, 14, ['flights', 'cars', 'phones', 'hotels', 'books', 'games', 'tickets', 'recipes']) || ' ' ||
                  skewed(i, 15, 3000)::VARCHAR
        END AS search_phrase
    FROM range(CAST(getvariable('rows') AS BIGINT)) t(i)
)
SELECT
    (h(i, 20) >> 1)::BIGINT AS WatchID,
    (h(i, 21) % 2)::SMALLINT AS JavaEnable,
    CASE WHEN h(i, 22) % 50 = 0 THEN 'Google - ' || search_phrase || ' ' || (h(i, 23) % 100)::VARCHAR
         WHEN h(i, 22) % 50 = 1 THEN ''
         ELSE pick(i, 24, ['News', 'Weather', 'Shop', 'Video', 'Maps', 'Mail']) || ' page ' || skewed(i, 25, 20000)::VARCHAR
    END AS Title,
    1::SMALLINT AS GoodEvent,
    event_time AS EventTime,
    CAST(event_time AS DATE) AS EventDate,
    (CASE WHEN h(i, 26) % 100 < 30 THEN 62 ELSE skewed(i, 27, 2000) END)::INTEGER AS CounterID,
    ((h(i, 28) % 300000)::BIGINT - 150000)::INTEGER AS ClientIP,
    skewed(i, 29, 1000)::INTEGER AS RegionID,
    (CASE WHEN i % 100003 = 7 THEN 435090932899640449
          ELSE (h(i % (CAST(getvariable('rows') AS BIGINT) // 8 + 1), 30) >> 4) END)::BIGINT AS UserID,
    (h(i, 31) % 3)::SMALLINT AS CounterClass,
    (h(i, 32) % 50)::SMALLINT AS OS,
    (h(i, 33) % 60)::SMALLINT AS UserAgent,
    url AS URL,
    referer AS Referer,
    (CASE WHEN h(i, 34) % 10 = 0 THEN 1 ELSE 0 END)::SMALLINT AS IsRefresh,
    (h(i, 35) % 10)::SMALLINT AS RefererCategoryID,
    skewed(i, 36, 1000)::INTEGER AS RefererRegionID,
    (h(i, 37) % 10)::SMALLINT AS URLCategoryID,
    skewed(i, 38, 1000)::INTEGER AS URLRegionID,
    pick(i, 39, [1024, 1280, 1366, 1440, 1600, 1920, 800, 0])::SMALLINT AS ResolutionWidth,
    pick(i, 40, [768, 800, 900, 1024, 1080, 600, 0])::SMALLINT AS ResolutionHeight,
    pick(i, 41, [16, 24, 32])::SMALLINT AS ResolutionDepth,
    (h(i, 42) % 12)::SMALLINT AS FlashMajor,
    (h(i, 43) % 10)::SMALLINT AS FlashMinor,
    pick(i, 44, ['', '0', '1', '2', '3']) AS FlashMinor2,
    (h(i, 45) % 5)::SMALLINT AS NetMajor,
    (h(i, 46) % 10)::SMALLINT AS NetMinor,
    (h(i, 47) % 30)::SMALLINT AS UserAgentMajor,
    pick(i, 48, ['0', '1', '2', 'a', 'b']) AS UserAgentMinor,
    (h(i, 49) % 2)::SMALLINT AS CookieEnable,
    (h(i, 50) % 2)::SMALLINT AS JavascriptEnable,
    (CASE WHEN h(i, 51) % 10 = 0 THEN 1 ELSE 0 END)::SMALLINT AS IsMobile,
    (h(i, 52) % 10)::SMALLINT AS MobilePhone,
    CASE WHEN h(i, 53) % 10 = 0 THEN pick(i, 54, ['iPhone', 'iPad', 'Galaxy S3', 'Lumia 920', 'Nexus 4', 'Xperia Z', 'HTC One', 'Optimus G', 'Desire', 'Kindle', 'Asha 300', 'Blackberry']) ELSE '' END AS MobilePhoneModel,
    CASE WHEN h(i, 55) % 4 = 0 THEN 'p=' || (h(i, 56) % 1000)::VARCHAR ELSE '' END AS Params,
    (h(i, 57) % 100000)::INTEGER AS IPNetworkID,
    ((h(i, 58) % 11)::INTEGER - 1)::SMALLINT AS TraficSourceID,
    (CASE WHEN h(i, 59) % 10 < 6 THEN 0 ELSE 1 + h(i, 60) % 20 END)::SMALLINT AS SearchEngineID,
    search_phrase AS SearchPhrase,
    (CASE WHEN h(i, 61) % 20 = 0 THEN 1 + h(i, 62) % 30 ELSE 0 END)::SMALLINT AS AdvEngineID,
    (h(i, 63) % 2)::SMALLINT AS IsArtifical,
    (h(i, 64) % 200)::SMALLINT AS WindowClientWidth,
    (h(i, 65) % 200)::SMALLINT AS WindowClientHeight,
    ((h(i, 66) % 25)::INTEGER - 12)::SMALLINT AS ClientTimeZone,
    event_time - to_seconds((h(i, 67) % 120)::BIGINT) AS ClientEventTime,
    (h(i, 68) % 6)::SMALLINT AS SilverlightVersion1,
    (h(i, 69) % 10)::SMALLINT AS SilverlightVersion2,
    (h(i, 70) % 70000)::INTEGER AS SilverlightVersion3,
    (h(i, 71) % 10)::SMALLINT AS SilverlightVersion4,
    pick(i, 72, ['utf-8', 'windows-1251', 'koi8-r']) AS PageCharset,
    (h(i, 73) % 1000)::INTEGER AS CodeVersion,
    (CASE WHEN h(i, 74) % 10 = 0 THEN 1 ELSE 0 END)::SMALLINT AS IsLink,
    (CASE WHEN h(i, 75) % 50 = 0 THEN 1 ELSE 0 END)::SMALLINT AS IsDownload,
    (h(i, 76) % 2)::SMALLINT AS IsNotBounce,
    (h(i, 77) >> 2)::BIGINT AS FUniqID,
    url AS OriginalURL,
    (h(i, 78) % 1000000)::INTEGER AS HID,
    0::SMALLINT AS IsOldCounter,
    (h(i, 79) % 2)::SMALLINT AS IsEvent,
    (h(i, 80) % 2)::SMALLINT AS IsParameter,
    (CASE WHEN h(i, 81) % 20 = 0 THEN 1 ELSE 0 END)::SMALLINT AS DontCountHits,
    (h(i, 82) % 2)::SMALLINT AS WithHash,
    pick(i, 83, ['E', 'F', 'N', 'T']) AS HitColor,
    event_time + to_seconds((h(i, 84) % 7200)::BIGINT) AS LocalEventTime,
    (h(i, 85) % 80)::SMALLINT AS Age,
    (h(i, 86) % 3)::SMALLINT AS Sex,
    (h(i, 87) % 5)::SMALLINT AS Income,
    (h(i, 88) % 1000)::SMALLINT AS Interests,
    (h(i, 89) % 5)::SMALLINT AS Robotness,
    ((h(i, 90) % 2000000)::BIGINT - 1000000)::INTEGER AS RemoteIP,
    (h(i, 91) % 100)::INTEGER AS WindowName,
    (h(i, 92) % 100)::INTEGER AS OpenerName,
    (h(i, 93) % 20)::SMALLINT AS HistoryLength,
    pick(i, 94, ['ru', 'en', 'uk', 'de', 'tr']) AS BrowserLanguage,
    pick(i, 95, ['ru', 'us', 'ua', 'de', 'tr', 'by']) AS BrowserCountry,
    CASE WHEN h(i, 96) % 20 = 0 THEN pick(i, 97, ['vk', 'facebook', 'twitter']) ELSE '' END AS SocialNetwork,
    CASE WHEN h(i, 98) % 40 = 0 THEN pick(i, 99, ['like', 'share']) ELSE '' END AS SocialAction,
    (CASE WHEN h(i, 100) % 100 = 0 THEN 404 ELSE 0 END)::SMALLINT AS HTTPError,
    (h(i, 101) % 5000)::INTEGER AS SendTiming,
    (h(i, 102) % 500)::INTEGER AS DNSTiming,
    (h(i, 103) % 1000)::INTEGER AS ConnectTiming,
    (h(i, 104) % 3000)::INTEGER AS ResponseStartTiming,
    (h(i, 105) % 6000)::INTEGER AS ResponseEndTiming,
    (h(i, 106) % 8000)::INTEGER AS FetchTiming,
    (h(i, 107) % 10)::SMALLINT AS SocialSourceNetworkID,
    CASE WHEN h(i, 108) % 30 = 0 THEN 'page' || (h(i, 109) % 500)::VARCHAR ELSE '' END AS SocialSourcePage,
    (CASE WHEN h(i, 110) % 50 = 0 THEN h(i, 111) % 100000 ELSE 0 END)::BIGINT AS ParamPrice,
    CASE WHEN h(i, 112) % 50 = 0 THEN 'order' || (h(i, 113) % 100000)::VARCHAR ELSE '' END AS ParamOrderID,
    CASE WHEN h(i, 112) % 50 = 0 THEN pick(i, 114, ['RUB', 'USD', 'EUR']) ELSE '' END AS ParamCurrency,
    (h(i, 115) % 4)::SMALLINT AS ParamCurrencyID,
    CASE WHEN h(i, 116) % 30 = 0 THEN 'direct' ELSE '' END AS OpenstatServiceName,
    CASE WHEN h(i, 116) % 30 = 0 THEN (h(i, 117) % 1000)::VARCHAR ELSE '' END AS OpenstatCampaignID,
    CASE WHEN h(i, 116) % 30 = 0 THEN (h(i, 118) % 1000)::VARCHAR ELSE '' END AS OpenstatAdID,
    CASE WHEN h(i, 116) % 30 = 0 THEN (h(i, 119) % 1000)::VARCHAR ELSE '' END AS OpenstatSourceID,
    CASE WHEN h(i, 120) % 25 = 0 THEN pick(i, 121, ['google', 'yandex', 'newsletter']) ELSE '' END AS UTMSource,
    CASE WHEN h(i, 120) % 25 = 0 THEN pick(i, 122, ['cpc', 'email', 'banner']) ELSE '' END AS UTMMedium,
    CASE WHEN h(i, 120) % 25 = 0 THEN 'campaign' || (h(i, 123) % 50)::VARCHAR ELSE '' END AS UTMCampaign,
    CASE WHEN h(i, 120) % 25 = 0 THEN 'content' || (h(i, 124) % 50)::VARCHAR ELSE '' END AS UTMContent,
    CASE WHEN h(i, 120) % 25 = 0 THEN search_phrase ELSE '' END AS UTMTerm,
    CASE WHEN h(i, 125) % 40 = 0 THEN 'tag' || (h(i, 126) % 20)::VARCHAR ELSE '' END AS FromTag,
    (h(i, 127) % 2)::SMALLINT AS HasGCLID,
    (CASE WHEN h(i, 128) % 40 = 0 THEN 3594120000172545465 ELSE hash(referer) >> 1 END)::BIGINT AS RefererHash,
    (CASE WHEN h(i, 129) % 10 = 0 THEN 2868770270353813622 ELSE hash(url) >> 1 END)::BIGINT AS URLHash,
    (h(i, 130) % 1000)::INTEGER AS CLID
FROM base
ORDER BY EventDate, CounterID;
