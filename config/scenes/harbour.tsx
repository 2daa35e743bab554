<?xml version="1.0" encoding="UTF-8"?>
<!-- The harbour scene's tileset (config/README.md): grass, sand, water, pier planks, walls. -->
<tileset version="1.10" tiledversion="1.10.2" name="harbour" tilewidth="16" tileheight="16" tilecount="5" columns="5">
 <tile id="0">
  <properties>
   <property name="blocked" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="1">
  <properties>
   <property name="cost" type="int" value="2"/>
  </properties>
 </tile>
 <tile id="2">
  <properties>
   <property name="blocked" type="bool" value="true"/>
  </properties>
 </tile>
 <tile id="3">
  <properties>
   <property name="blocked" type="bool" value="false"/>
  </properties>
 </tile>
 <tile id="4">
  <objectgroup draworder="index">
   <object id="1" x="0" y="0" width="16" height="16"/>
  </objectgroup>
 </tile>
</tileset>
